package tools

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/sandbox/gitshadow"
)

// The walker reads the repository's index to list what git lists whatever
// the ignore rules say: tracked files, and each submodule as one path. The
// index is data a sandbox or a hostile repository may have written, so it
// only ever names entries the walk itself meets in the directories it
// reads (confined, never through a symlink): an entry cannot make the walk
// list a path that is not there, or go anywhere it would not go. A
// malformed, oversized, split or sparse index is no index: the walk lists
// what the rules alone allow.

// Index limits: an index over maxIndexSize bytes or with more than
// maxIndexEntries entries is not read; a version 4 index whose paths add
// up to more than maxIndexNames bytes is malformed (each path there is a
// suffix of the one before, so a small file can describe long paths).
const (
	maxIndexSize    = 256 << 20
	maxIndexEntries = 4 << 20
	maxIndexNames   = 512 << 20
	maxIndexPath    = 4096
)

// trackedIndex holds the index's paths below the workspace, relative to
// it, in git's order (bytes).
type trackedIndex struct {
	names    string // every path, back to back
	entries  []indexName
	gitlinks bool // some entry is a gitlink
}

type indexName struct {
	end     uint32 // the path is names[previous end:end]
	gitlink bool
}

func (x *trackedIndex) name(i int) string {
	start := uint32(0)
	if i > 0 {
		start = x.entries[i-1].end
	}
	return x.names[start:x.entries[i].end]
}

// search returns the first entry not before p.
func (x *trackedIndex) search(p string) int {
	lo, hi := 0, len(x.entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.name(m) < p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// tracked reports whether the index has the path p (a file, a symlink or
// a gitlink).
func (x *trackedIndex) tracked(p string) bool {
	if x == nil {
		return false
	}
	i := x.search(p)
	return i < len(x.entries) && x.name(i) == p
}

// gitlink reports whether p is a submodule in the index.
func (x *trackedIndex) gitlink(p string) bool {
	if x == nil || !x.gitlinks {
		return false
	}
	i := x.search(p)
	return i < len(x.entries) && x.entries[i].gitlink && x.name(i) == p
}

// holds reports whether some tracked path lies below the directory dir
// ("" is the workspace).
func (x *trackedIndex) holds(dir string) bool {
	if x == nil || len(x.entries) == 0 {
		return false
	}
	if dir == "" {
		return true
	}
	prefix := dir + "/"
	i := x.search(prefix)
	return i < len(x.entries) && strings.HasPrefix(x.name(i), prefix)
}

// parseIndex reads an index file (versions 2 to 4), keeping the paths
// under prefix ("" or a directory with a trailing slash) with prefix cut
// off. ok is false when the file is malformed, split or sparse. Entries
// whose path could never name a file of the worktree ("..", ".git", an
// empty or absolute element) are passed by.
func parseIndex(b []byte, prefix string) (x *trackedIndex, ok bool) {
	if len(b) < 12+20 || string(b[:4]) != "DIRC" {
		return nil, false
	}
	version := binary.BigEndian.Uint32(b[4:8])
	count := binary.BigEndian.Uint32(b[8:12])
	if version < 2 || version > 4 || count > maxIndexEntries {
		return nil, false
	}
	body := b[:len(b)-20] // the trailing checksum
	x = &trackedIndex{entries: make([]indexName, 0, min(int(count), len(body)/40))}
	var names []byte
	lastStart := -1 // where the last path kept starts in names
	var prev []byte // the previous path, which version 4 paths build on
	var pathBuf []byte
	total := 0
	pos := 12
	for range count {
		const fixed = 62 // stat data, mode, object id, flags
		entry := pos
		if pos+fixed > len(body) {
			return nil, false
		}
		mode := binary.BigEndian.Uint32(body[pos+24:])
		flags := binary.BigEndian.Uint16(body[pos+60:])
		start := pos + fixed
		if flags&0x4000 != 0 { // extended flags
			if version < 3 {
				return nil, false
			}
			start += 2
		}
		if start > len(body) {
			return nil, false
		}
		var name []byte
		if version == 4 {
			strip, n := indexVarint(body[start:])
			if n <= 0 || strip > uint64(len(prev)) {
				return nil, false
			}
			nul := bytes.IndexByte(body[start+n:], 0)
			if nul < 0 {
				return nil, false
			}
			keep := len(prev) - int(strip)
			suffix := body[start+n : start+n+nul]
			if bytes.Compare(suffix, prev[keep:]) < 0 {
				return nil, false // out of order: not an index git wrote
			}
			pathBuf = append(pathBuf[:keep], suffix...)
			name = pathBuf
			pos = start + n + nul + 1
			if total += len(name); total > maxIndexNames {
				return nil, false
			}
		} else {
			nul := bytes.IndexByte(body[start:], 0)
			if nul < 0 {
				return nil, false
			}
			name = body[start : start+nul]
			if bytes.Compare(name, prev) < 0 {
				return nil, false // out of order: not an index git wrote
			}
			pos = entry + (start-entry+nul+8)&^7 // NULs pad an entry to 8 bytes
		}
		if pos > len(body) || len(name) > maxIndexPath {
			return nil, false
		}
		prev = name
		switch mode >> 12 {
		case 0o10, 0o12, 0o16: // a file, a symlink, a gitlink
		default: // a directory (a sparse index), or no mode git writes
			return nil, false
		}
		if !bytes.HasPrefix(name, []byte(prefix)) {
			continue
		}
		rel := name[len(prefix):]
		if lastStart >= 0 && bytes.Equal(names[lastStart:], rel) {
			continue // a conflict's later stages
		}
		if !worktreePath(rel) {
			continue
		}
		lastStart = len(names)
		names = append(names, rel...)
		if len(names) > maxIndexNames {
			return nil, false
		}
		gitlink := mode>>12 == 0o16
		x.gitlinks = x.gitlinks || gitlink
		x.entries = append(x.entries, indexName{end: uint32(len(names)), gitlink: gitlink})
	}
	// Extensions: a split index names entries kept in another file.
	for pos < len(body) {
		if pos+8 > len(body) {
			return nil, false
		}
		sig := string(body[pos : pos+4])
		size := binary.BigEndian.Uint32(body[pos+4:])
		if uint64(size) > uint64(len(body)-pos-8) {
			return nil, false
		}
		if sig == "link" || sig == "sdir" {
			return nil, false
		}
		pos += 8 + int(size)
	}
	x.names = string(names)
	return x, true
}

// indexVarint decodes the number that starts a version 4 path (how many
// bytes of the previous path to drop): git's offset encoding, in which
// each continuation adds one before shifting. n is the bytes read, 0 when
// b ends first or the number overflows.
func indexVarint(b []byte) (v uint64, n int) {
	for n < len(b) && n < 10 {
		c := b[n]
		n++
		v += uint64(c & 0x7f)
		if c&0x80 == 0 {
			return v, n
		}
		v = (v + 1) << 7
	}
	return 0, 0
}

// worktreePath reports whether an index path can name an entry of the
// worktree: relative, with no empty, ".", ".." or .git element (in any
// case).
func worktreePath(p []byte) bool {
	if len(p) == 0 {
		return false
	}
	for elem := range bytes.SplitSeq(p, []byte("/")) {
		switch {
		case len(elem) == 0, string(elem) == ".", string(elem) == "..", bytes.EqualFold(elem, []byte(".git")):
			return false
		}
	}
	return true
}

// The parsed index of each repository, kept while the file is unchanged:
// a checkpoint's rescan walks one directory at a time.
var indexCache struct {
	sync.Mutex
	m map[string]cachedIndex
}

type cachedIndex struct {
	id indexFileID
	x  *trackedIndex
}

type indexFileID struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

// loadIndex finds the workspace's repository by gitshadow.Discover's
// rules (no symlinked .git, no gitfile it would not accept) and reads its
// index; nil when there is none or it cannot be used.
func loadIndex(root *os.Root) *trackedIndex {
	ws := root.Name()
	if !filepath.IsAbs(ws) {
		return nil
	}
	ws = filepath.Clean(ws)
	repo, err := gitshadow.Discover(ws)
	if err != nil || repo == nil {
		return nil
	}
	prefix, err := filepath.Rel(repo.Top, ws)
	if err != nil || prefix == ".." || strings.HasPrefix(prefix, "../") {
		return nil
	}
	if prefix == "." {
		prefix = ""
	} else {
		prefix = filepath.ToSlash(prefix) + "/"
	}
	var f *os.File
	if repo.Top == ws && !repo.Gitfile {
		// The git directory is the workspace's .git: read through the root.
		f, err = confine.OpenRegular(root, ".git/index")
	} else {
		// Outside the workspace, where Discover found it.
		f, err = openRegularFile(filepath.Join(repo.CommonDir, filepath.FromSlash(repo.Worktree), "index"))
	}
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() > maxIndexSize {
		return nil
	}
	st, stable := StatOf(fi)
	id := indexFileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.MTime, ctime: st.CTime}
	key := ws
	indexCache.Lock()
	c, hit := indexCache.m[key]
	indexCache.Unlock()
	if hit && stable && c.id == id {
		return c.x
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
	if err != nil || int64(len(data)) != fi.Size() {
		return nil
	}
	x, ok := parseIndex(data, prefix)
	if !ok {
		x = nil
	}
	indexCache.Lock()
	if indexCache.m == nil || len(indexCache.m) >= 16 {
		indexCache.m = map[string]cachedIndex{}
	}
	indexCache.m[key] = cachedIndex{id: id, x: x}
	indexCache.Unlock()
	return x
}

// openRegularFile opens the regular file at p, not following a symlink in
// its last element, and never blocking on a FIFO.
func openRegularFile(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: p, Err: confine.ErrNotRegular}
	}
	return f, nil
}
