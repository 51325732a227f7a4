package helper

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
)

// oomFiles hold the cgroup's oom-kill counter: cgroup v2, then v1.
var oomFiles = []string{
	"/sys/fs/cgroup/memory.events",
	"/sys/fs/cgroup/memory/memory.oom_control",
}

// oomCounter reads the cgroup's oom-kill counter before and after every
// command. The file that has it stays open and is read again from its
// start (a cgroup file is written anew for each read from offset 0): an
// open of a cgroup file, and of the one that is missing, costs more than
// the read.
type oomCounter struct {
	files []string

	mu  sync.Mutex
	f   *os.File // the file that had the counter
	buf []byte
}

func newOOMCounter(files []string) *oomCounter { return &oomCounter{files: files} }

// read returns the counter of the first of files that has one; ok is
// false when none does (unknown).
func (c *oomCounter) read() (n uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		c.buf = make([]byte, 4096)
	}
	if c.f != nil {
		if n, ok := c.readFrom(c.f); ok {
			return n, true
		}
		_ = c.f.Close()
		c.f = nil
	}
	for _, name := range c.files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		if n, ok := c.readFrom(f); ok {
			c.f = f
			return n, true
		}
		_ = f.Close()
	}
	return 0, false
}

func (c *oomCounter) readFrom(f *os.File) (uint64, bool) {
	k, err := f.ReadAt(c.buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false
	}
	return parseOOMKills(c.buf[:k])
}

func parseOOMKills(data []byte) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, found := bytes.Cut(sc.Bytes(), []byte(" "))
		if !found || string(key) != "oom_kill" {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(val)), 10, 64)
		return n, err == nil
	}
	return 0, false
}
