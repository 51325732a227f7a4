package copymode

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/tools"
)

// Entry is one file of a manifest: what the walker lists in the copy.
type Entry struct {
	Path string
	// Mode is 0o644, 0o755 or fs.ModeSymlink (git's three file modes).
	Mode fs.FileMode
	// Hash is the git blob hash of the content (of the target for a
	// symlink), hex.
	Hash string
	Size int64
}

// gitMode and modeOf convert between Entry.Mode and git's octal modes.
func gitMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "120000"
	case m&0o111 != 0:
		return "100755"
	}
	return "100644"
}

func modeOf(git string) (fs.FileMode, error) {
	switch git {
	case "100644":
		return 0o644, nil
	case "100755":
		return 0o755, nil
	case "120000":
		return fs.ModeSymlink, nil
	}
	return 0, fmt.Errorf("bad mode %q", git)
}

// entryMode is the manifest mode of a file with mode m.
func entryMode(m fs.FileMode) fs.FileMode {
	switch {
	case m&fs.ModeSymlink != 0:
		return fs.ModeSymlink
	case m&0o111 != 0:
		return 0o755
	}
	return 0o644
}

// appendEntry and parseEntries are the manifest's records:
// "MODE HASH SIZE PATH\x00".
func appendEntry(b []byte, e Entry) []byte {
	b = append(b, gitMode(e.Mode)...)
	b = append(b, ' ')
	b = append(b, e.Hash...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.Size, 10)
	b = append(b, ' ')
	b = append(b, e.Path...)
	return append(b, 0)
}

// Manifest is a manifest as read: every file (Full), or what changed since
// the generation the caller asked with.
type Manifest struct {
	// Gen names this manifest, for the next delta ("-": none).
	Gen  string
	Full bool
	// Entries are the files (Full), or the files added or changed.
	Entries []Entry
	// Deleted are the files gone since (a delta).
	Deleted []string
}

// ParseManifest reads a manifest.
func ParseManifest(r io.Reader) (Manifest, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.ReadString(0)
	f := strings.Fields(strings.TrimSuffix(head, "\x00"))
	if err != nil || len(f) != 3 || f[0] != manifestMagic || (f[2] != "full" && f[2] != "delta") {
		return Manifest{}, fmt.Errorf("read the manifest: a bad header %q (%v)", head, err)
	}
	m := Manifest{Gen: f[1], Full: f[2] == "full"}
	for {
		rec, err := br.ReadString(0)
		if errors.Is(err, io.EOF) && rec == "" {
			return m, nil
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("read the manifest: %w", err)
		}
		rec = strings.TrimSuffix(rec, "\x00")
		if p, ok := strings.CutPrefix(rec, "D "); ok && !m.Full {
			if err := checkName(p); err != nil {
				return Manifest{}, err
			}
			m.Deleted = append(m.Deleted, p)
			continue
		}
		fields := strings.SplitN(rec, " ", 4)
		if len(fields) != 4 || len(fields[1]) != 40 {
			return Manifest{}, fmt.Errorf("bad manifest record %q", rec)
		}
		mode, err := modeOf(fields[0])
		if err != nil {
			return Manifest{}, err
		}
		size, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return Manifest{}, fmt.Errorf("bad manifest record %q", rec)
		}
		if err := checkName(fields[3]); err != nil {
			return Manifest{}, err
		}
		m.Entries = append(m.Entries, Entry{Path: fields[3], Mode: mode, Hash: fields[1], Size: size})
	}
}

// BlobHash is git's hash of a blob holding data.
func BlobHash(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// statKey is what says a file has not changed since it was hashed, as
// git's index says it: size, mtime, ctime, inode and mode.
type statKey struct {
	Size, MTime, CTime int64
	Ino                uint64
	Mode               fs.FileMode
}

func keyOf(st tools.FileStat) statKey {
	return statKey{Size: st.Size, MTime: st.MTime, CTime: st.CTime, Ino: st.Ino, Mode: entryMode(st.Mode)}
}

// racyWindow: a file whose change time is this close to the scan that
// hashed it may change again within the same timestamp, unseen; it is
// hashed again next time rather than trusted.
const racyWindow = 2 * time.Second

// hashCache remembers the hashes of files by their stat data, and what
// the last full manifest said (its generation), so that the next can say
// only what changed. Its file lives in the sandbox: a process there can
// change it, which can only hide the sandbox's own changes from its
// manifest (the host hashes everything it fetches itself).
type hashCache struct {
	gen     string
	entries map[string]cached
}

type cached struct {
	key  statKey
	hash string
	// racy: the file changed too close to the manifest that hashed it to
	// trust the hash next time; it is kept to tell whether it changed.
	racy bool
}

// cacheMagic starts a cache file: "shiro-ws-manifest GEN\n".
const cacheMagic = "shiro-ws-manifest"

func emptyCache() *hashCache { return &hashCache{entries: map[string]cached{}} }

func loadCache(name string) *hashCache {
	if name == "" {
		return emptyCache()
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return emptyCache()
	}
	nl := bytes.IndexByte(data, '\n')
	head := strings.Fields(string(data[:max(nl, 0)]))
	if nl < 0 || len(head) != 2 || head[0] != cacheMagic {
		return emptyCache()
	}
	c := &hashCache{gen: head[1], entries: map[string]cached{}}
	data = data[nl+1:]
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		end := bytes.IndexByte(data, 0)
		if nl < 0 || end < nl {
			return emptyCache() // damaged: start over
		}
		f := bytes.Fields(data[:nl])
		p := string(data[nl+1 : end])
		data = data[end+1:]
		if len(f) != 7 || len(f[5]) != 40 || p == "" {
			return emptyCache()
		}
		var k statKey
		var ok [5]bool
		k.Size, ok[0] = parseInt(f[0])
		k.MTime, ok[1] = parseInt(f[1])
		k.CTime, ok[2] = parseInt(f[2])
		k.Ino, ok[3] = parseUint(f[3], 10)
		mode, mok := parseUint(f[4], 8)
		ok[4] = mok
		if ok != [5]bool{true, true, true, true, true} {
			return emptyCache()
		}
		k.Mode = fs.FileMode(mode)
		c.entries[p] = cached{key: k, hash: string(f[5]), racy: string(f[6]) == "r"}
	}
	return c
}

func parseInt(b []byte) (int64, bool) {
	v, err := strconv.ParseInt(string(b), 10, 64)
	return v, err == nil
}

func parseUint(b []byte, base int) (uint64, bool) {
	v, err := strconv.ParseUint(string(b), base, 64)
	return v, err == nil
}

// save writes the cache of generation gen: "SIZE MTIME CTIME INO MODE
// HASH r|-\nPATH\x00" per file, through a temporary file renamed over the
// old one.
func saveCache(name, gen string, entries []Entry, keys []statKey, start time.Time) error {
	if name == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	racyAfter := start.Add(-racyWindow).UnixNano()
	buf := make([]byte, 0, 32+len(entries)*100)
	buf = append(buf, cacheMagic+" "+gen+"\n"...)
	for i, e := range entries {
		k := keys[i]
		if e.Hash == "" {
			continue
		}
		buf = strconv.AppendInt(buf, k.Size, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, k.MTime, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, k.CTime, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendUint(buf, k.Ino, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendUint(buf, uint64(k.Mode), 8)
		buf = append(buf, ' ')
		buf = append(buf, e.Hash...)
		if k.CTime >= racyAfter || k.MTime >= racyAfter {
			buf = append(buf, " r\n"...)
		} else {
			buf = append(buf, " -\n"...)
		}
		buf = append(buf, e.Path...)
		buf = append(buf, 0)
	}
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, buf, 0o600); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, name)
}

// newGeneration names a manifest.
func newGeneration() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// A manifest's first record says what follows: "shiro-manifest GEN
// full|delta\x00". A delta (asked for with the generation of the last
// full or delta manifest the caller read, when the cache still holds it)
// lists only the files added or changed since, and "D PATH\x00" for each
// file gone.
const manifestMagic = "shiro-manifest"

// writeManifest lists the copy's files (only, when onlyMode) with their
// hashes; cacheFile, when set, remembers hashes between calls, and since,
// when it names the cache's generation, asks for a delta.
func writeManifest(ctx context.Context, root *os.Root, only []string, onlyMode bool, cacheFile, since string, w io.Writer) error {
	start := time.Now()
	cache := loadCache(cacheFile)
	delta := !onlyMode && since != "" && since == cache.gen
	var entries []Entry
	var keys []statKey
	add := func(p string, st tools.FileStat) {
		if !st.Mode.IsRegular() && st.Mode&fs.ModeSymlink == 0 {
			return
		}
		k := keyOf(st)
		e := Entry{Path: p, Mode: k.Mode, Size: st.Size}
		if c, ok := cache.entries[p]; ok && c.key == k && !c.racy {
			e.Hash = c.hash
		}
		entries, keys = append(entries, e), append(keys, k)
	}
	if onlyMode {
		for _, p := range only {
			if err := checkName(p); err != nil {
				return err
			}
			fi, err := root.Lstat(p)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
					continue
				}
				return err
			}
			st, ok := tools.StatOf(fi)
			if !ok {
				st = tools.FileStat{Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
			}
			add(p, st)
		}
	} else {
		if err := walkParallel(ctx, root, add); err != nil {
			return fmt.Errorf("walk the workspace copy: %w", err)
		}
	}
	if err := hashMissing(ctx, root, entries); err != nil {
		return err
	}
	gen, kind := "-", "full"
	if !onlyMode {
		gen = newGeneration()
	}
	if delta {
		kind = "delta"
	}
	buf := append([]byte(manifestMagic+" "+gen+" "+kind), 0)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.Hash == "" { // gone while it was read
			continue
		}
		seen[e.Path] = true
		if c, ok := cache.entries[e.Path]; delta && ok && c.hash == e.Hash && c.key.Mode == e.Mode {
			continue
		}
		buf = appendEntry(buf[:0], e)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	if delta {
		for p := range cache.entries {
			if !seen[p] {
				buf = append(append(append(buf[:0], "D "...), p...), 0)
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
		}
	}
	if onlyMode {
		return nil
	}
	// A cache that cannot be written costs only time (and the next
	// manifest is full).
	_ = saveCache(cacheFile, gen, entries, keys, start)
	return nil
}

// walkParallel is the walker's listing with lstat data (tools.WalkStat,
// symlinks to directories included), its top-level directories walked on
// a few goroutines at once: a walk is mostly system calls, which the
// kernel serves for several directories at a time. fn is called from
// this goroutine, the root's files first, then each directory's in turn.
func walkParallel(ctx context.Context, root *os.Root, fn func(p string, st tools.FileStat)) error {
	type found struct {
		path string
		st   tools.FileStat
	}
	var tops []string
	err := tools.WalkStat(ctx, root, tools.WalkOptions{DirLinks: true, EnterDir: func(rel string) bool {
		tops = append(tops, rel)
		return false
	}}, func(p string, st tools.FileStat) error {
		fn(p, st)
		return nil
	})
	if err != nil || len(tops) == 0 {
		return err
	}
	lists := make([][]found, len(tops))
	errs := make([]error, len(tops))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(4, len(tops)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = tools.WalkStat(ctx, root, tools.WalkOptions{Dir: tops[i], DirLinks: true}, func(p string, st tools.FileStat) error {
					lists[i] = append(lists[i], found{p, st})
					return nil
				})
			}
		}()
	}
	for i := range tops {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, l := range lists {
		for _, f := range l {
			fn(f.path, f.st)
		}
	}
	return nil
}

// hashMissing fills the hashes the cache did not have, on a few
// goroutines joined before it returns, a directory at a time (each opened
// once). A file that vanished meanwhile is left without a hash.
func hashMissing(ctx context.Context, root *os.Root, entries []Entry) error {
	var groups [][]int // indices of entries, by directory, in walk order
	last := ""
	for i, e := range entries {
		if e.Hash != "" {
			continue
		}
		if d := path.Dir(e.Path); d != last || len(groups) == 0 {
			groups, last = append(groups, nil), d
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], i)
	}
	if len(groups) == 0 {
		return nil
	}
	workers := min(max(runtime.NumCPU(), 2), 8, len(groups))
	next := make(chan []int)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := sha1.New()
			buf := make([]byte, 64<<10)
			for group := range next {
				if errs[w] == nil {
					errs[w] = hashDir(root, entries, group, h, buf)
				}
			}
		}()
	}
	for _, g := range groups {
		if ctx.Err() != nil {
			break
		}
		next <- g
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// hashDir hashes the entries of group, which share a directory.
func hashDir(root *os.Root, entries []Entry, group []int, h hash.Hash, buf []byte) error {
	dir, err := root.OpenRoot(path.Dir(entries[group[0]].Path))
	if err != nil {
		return gone(err)
	}
	defer dir.Close()
	for _, i := range group {
		sum, err := hashEntry(dir, path.Base(entries[i].Path), entries[i].Mode, h, buf)
		if err != nil {
			return err
		}
		entries[i].Hash = sum
	}
	return nil
}

// hashEntry is the blob hash of the content of name in dir ("" when it
// is gone).
func hashEntry(dir *os.Root, name string, mode fs.FileMode, h hash.Hash, buf []byte) (string, error) {
	if mode&fs.ModeSymlink != 0 {
		target, err := dir.Readlink(name)
		if err != nil {
			return "", gone(err)
		}
		return BlobHash([]byte(target)), nil
	}
	f, err := confine.OpenRegular(dir, name)
	if err != nil {
		if errors.Is(err, confine.ErrNotRegular) {
			return "", nil
		}
		return "", gone(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	h.Reset()
	fmt.Fprintf(h, "blob %d\x00", fi.Size())
	n, err := io.CopyBuffer(h, io.LimitReader(f, fi.Size()), buf)
	if err != nil {
		return "", err
	}
	if n != fi.Size() { // it shrank while read: read it whole
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
		data, err := io.ReadAll(f)
		if err != nil {
			return "", err
		}
		return BlobHash(data), nil
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// gone turns a file's disappearance into no error (its entry is dropped).
func gone(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	return err
}
