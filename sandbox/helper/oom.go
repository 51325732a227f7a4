package helper

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// oomFiles hold the cgroup's oom-kill counter: cgroup v2, then v1.
var oomFiles = []string{
	"/sys/fs/cgroup/memory.events",
	"/sys/fs/cgroup/memory/memory.oom_control",
}

// readOOMKills returns the "oom_kill N" counter of the first of files that
// has one; ok is false when none does (unknown).
func readOOMKills(files []string) (n uint64, ok bool) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, ok := parseOOMKills(data); ok {
			return n, true
		}
	}
	return 0, false
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
