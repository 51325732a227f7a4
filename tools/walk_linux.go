package tools

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/shiroagent/shiro/internal/confine"
)

// dirReader opens the directories of one walk. On Linux it opens them with
// openat2 below the walk's start directory, refusing every symlink, and
// reads them through a plain *os.File: a file opened through os.Root
// lstat's each entry in ReadDir, which makes a walk three times slower.
// Where openat2 is missing (old kernels, seccomp) it falls back to os.Root.
type dirReader struct {
	root    *os.Root
	base    *os.File // the start directory, opened through root
	baseRel string
	fast    bool
}

func newDirReader(root *os.Root, start string, fast bool) (*dirReader, error) {
	base, err := openDir(root, displayRel(start))
	if err != nil {
		return nil, err
	}
	r := &dirReader{root: root, base: base, baseRel: start, fast: fast}
	if fast {
		// Directories are read concurrently: find out once, here, whether
		// openat2 works, so r.fast never changes under the readers.
		fd, err := unix.Openat2(int(base.Fd()), ".", &openHow)
		switch {
		case err == nil:
			unix.Close(fd)
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			r.fast = false
		}
	}
	return r, nil
}

func (r *dirReader) close() { r.base.Close() }

var openHow = unix.OpenHow{
	Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
}

func (r *dirReader) open(rel string) (*os.File, error) {
	if r.fast {
		sub := "."
		if rel != r.baseRel {
			sub = strings.TrimPrefix(rel, r.baseRel)
			sub = strings.TrimPrefix(sub, "/")
		}
		fd, err := unix.Openat2(int(r.base.Fd()), sub, &openHow)
		if err != nil {
			return nil, &os.PathError{Op: "openat2", Path: rel, Err: err}
		}
		return os.NewFile(uintptr(fd), rel), nil
	}
	return openDir(r.root, displayRel(rel))
}

// readFileIn reads the regular file name in the open directory dir (at
// rel), never following a symlink.
func (r *dirReader) readFileIn(dir *os.File, rel, name string) ([]byte, error) {
	if !r.fast {
		return readRegular(r.root, joinRel(rel, name))
	}
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: joinRel(rel, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), joinRel(rel, name))
	defer f.Close()
	// The entry was a regular file when listed; it may have been swapped
	// since, and a FIFO with a writer would block the read.
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "read", Path: joinRel(rel, name), Err: confine.ErrNotRegular}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", joinRel(rel, name), err)
	}
	return data, nil
}

// lstat reads the lstat data of name in the open directory dir (at rel).
func (r *dirReader) lstat(dir *os.File, rel, name string) (FileStat, error) {
	if !r.fast {
		return lstatRoot(r.root, rel)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return FileStat{}, &os.PathError{Op: "fstatat", Path: rel, Err: err}
	}
	return statFromUnix(&st), nil
}

func statFromUnix(st *unix.Stat_t) FileStat {
	return fileStat(st.Mode, st.Size, st.Mtim.Nano(), st.Ctim.Nano(), st.Ino, st.Dev)
}

// StatOf turns lstat data (os.Lstat's, os.Root.Lstat's) into the walker's
// form, as WalkStat reports it; false when fi carries no such data.
func StatOf(fi fs.FileInfo) (FileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileStat{}, false
	}
	return fileStat(st.Mode, st.Size, st.Mtim.Nano(), st.Ctim.Nano(), st.Ino, uint64(st.Dev)), true
}

// fileStat keeps the permission bits and the kind of a stat's mode.
func fileStat(m uint32, size, mtime, ctime int64, ino, dev uint64) FileStat {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFREG:
	default:
		mode |= fs.ModeIrregular
	}
	return FileStat{Mode: mode, Size: size, MTime: mtime, CTime: ctime, Ino: ino, Dev: dev}
}

// lstatRoot reads rel's lstat data through root.
func lstatRoot(root *os.Root, rel string) (FileStat, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return FileStat{}, err
	}
	st := FileStat{Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.CTime = sys.Ctim.Nano()
		st.Ino, st.Dev = sys.Ino, sys.Dev
	}
	return st, nil
}

// direntBuffers hold getdents64 results; one per directory being read.
var direntBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// list reads the entries of the open directory dir (at rel). On the fast
// path it calls getdents64 itself: os.File.ReadDir clears a new buffer
// and makes a DirEntry for each name, which is a third of a walk's time.
func (r *dirReader) list(dir *os.File, rel string) ([]dirent, error) {
	if !r.fast {
		return listDirEntries(dir)
	}
	bp := direntBuffers.Get().(*[]byte)
	defer direntBuffers.Put(bp)
	buf := *bp
	fd := int(dir.Fd())
	type raw struct {
		start, end int
		typ        byte
	}
	var (
		names []byte
		raws  []raw
	)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: rel, Err: err}
		}
		if n <= 0 {
			break
		}
		for off := 0; off+19 <= n; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return nil, &os.PathError{Op: "getdents", Path: rel, Err: unix.EIO}
			}
			ino := binary.NativeEndian.Uint64(buf[off:])
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			if ino == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			start := len(names)
			names = append(names, name...)
			raws = append(raws, raw{start, len(names), typ})
		}
	}
	all := string(names) // one allocation for every name of the directory
	out := make([]dirent, 0, len(raws))
	for _, e := range raws {
		d := dirent{name: all[e.start:e.end]}
		switch e.typ {
		case unix.DT_REG:
		case unix.DT_DIR:
			d.typ = fs.ModeDir
		case unix.DT_LNK:
			d.typ = fs.ModeSymlink
		case unix.DT_UNKNOWN:
			// The file system does not say: ask it, never following a link.
			var st unix.Stat_t
			if err := unix.Fstatat(fd, d.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone since the listing
			}
			d.typ = fileStat(st.Mode, 0, 0, 0, 0, 0).Mode.Type()
		default:
			d.typ = fs.ModeIrregular // sockets, pipes, devices: never listed
		}
		out = append(out, d)
	}
	return out, nil
}
