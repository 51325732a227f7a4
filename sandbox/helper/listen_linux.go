package helper

import (
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/shiroagent/shiro/sandbox"
)

// ListListeners returns the listening TCP sockets of this network
// namespace, by port, from /proc/net/tcp and tcp6, with the process that
// holds each where this process may look at its descriptors (one of the
// same user's).
func ListListeners() ([]sandbox.Listener, error) {
	var raw []rawListener
	var firstErr error
	for _, t := range []struct {
		path string
		v6   bool
	}{{"/proc/net/tcp", false}, {"/proc/net/tcp6", true}} {
		data, err := readCapped(t.path, maxNetTable)
		if err != nil {
			if firstErr == nil && !os.IsNotExist(err) {
				firstErr = err
			}
			continue
		}
		raw = append(raw, parseNetTCP(data, t.v6)...)
	}
	if raw == nil && firstErr != nil {
		return nil, firstErr
	}
	want := make(map[uint64]bool, len(raw))
	for _, r := range raw {
		want[r.inode] = true
	}
	ls := mergeListeners(raw, socketOwners(want), procCommand)
	slices.SortFunc(ls, func(a, b sandbox.Listener) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		return strings.Compare(a.Address, b.Address)
	})
	return ls, nil
}

// readCapped reads at most limit bytes of the file at path.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// socketOwners maps the wanted socket inodes to the first process found
// holding each, among those whose descriptors this process may read.
func socketOwners(want map[uint64]bool) map[uint64]int {
	owners := map[uint64]int{}
	d, err := os.Open("/proc")
	if err != nil {
		return owners
	}
	defer d.Close()
	names, _ := d.Readdirnames(maxProcs)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		fdDir := "/proc/" + name + "/fd"
		f, err := os.Open(fdDir)
		if err != nil {
			continue
		}
		fds, _ := f.Readdirnames(maxFDs)
		f.Close()
		for _, fd := range fds {
			link, err := os.Readlink(fdDir + "/" + fd)
			if err != nil {
				continue
			}
			num, ok := strings.CutPrefix(link, "socket:[")
			if !ok {
				continue
			}
			inode, err := strconv.ParseUint(strings.TrimSuffix(num, "]"), 10, 64)
			if err != nil || !want[inode] {
				continue
			}
			if _, seen := owners[inode]; !seen {
				owners[inode] = pid
			}
		}
	}
	return owners
}

// procCommand is pid's command line, fit to show; its comm when the
// command line is empty.
func procCommand(pid int) string {
	base := "/proc/" + strconv.Itoa(pid)
	if b, err := readCapped(base+"/cmdline", maxCmdline); err == nil {
		if s := cleanCommand(b); s != "" {
			return s
		}
	}
	if b, err := readCapped(base+"/comm", 64); err == nil {
		return cleanCommand(b)
	}
	return ""
}
