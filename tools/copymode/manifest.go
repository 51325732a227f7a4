package copymode

import (
	"bufio"
	"bytes"
	"context"
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

// ParseManifest reads a manifest's records.
func ParseManifest(r io.Reader) ([]Entry, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Entry
	for {
		rec, err := br.ReadString(0)
		if errors.Is(err, io.EOF) && rec == "" {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the manifest: %w", err)
		}
		fields := strings.SplitN(strings.TrimSuffix(rec, "\x00"), " ", 4)
		if len(fields) != 4 || len(fields[1]) != 40 {
			return nil, fmt.Errorf("bad manifest record %q", rec)
		}
		mode, err := modeOf(fields[0])
		if err != nil {
			return nil, err
		}
		size, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad manifest record %q", rec)
		}
		if err := checkName(fields[3]); err != nil {
			return nil, err
		}
		out = append(out, Entry{Path: fields[3], Mode: mode, Hash: fields[1], Size: size})
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

// hashCache remembers the hashes of files by their stat data. Its file
// lives in the sandbox: a process there can change it, which can only hide
// the sandbox's own changes from its manifest (the host hashes everything
// it fetches itself).
type hashCache struct {
	entries map[string]cached
}

type cached struct {
	key  statKey
	hash string
}

func loadCache(name string) *hashCache {
	c := &hashCache{entries: map[string]cached{}}
	if name == "" {
		return c
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return c
	}
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		end := bytes.IndexByte(data, 0)
		if nl < 0 || end < nl {
			return &hashCache{entries: map[string]cached{}} // damaged: start over
		}
		f := bytes.Fields(data[:nl])
		p := string(data[nl+1 : end])
		data = data[end+1:]
		if len(f) != 6 || len(f[5]) != 40 || p == "" {
			return &hashCache{entries: map[string]cached{}}
		}
		var k statKey
		var ok [5]bool
		var ino uint64
		k.Size, ok[0] = parseInt(f[0])
		k.MTime, ok[1] = parseInt(f[1])
		k.CTime, ok[2] = parseInt(f[2])
		ino, ok[3] = parseUint(f[3], 10)
		mode, mok := parseUint(f[4], 8)
		ok[4] = mok
		if ok != [5]bool{true, true, true, true, true} {
			return &hashCache{entries: map[string]cached{}}
		}
		k.Ino, k.Mode = ino, fs.FileMode(mode)
		c.entries[p] = cached{key: k, hash: string(f[5])}
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

// save writes the cache: "SIZE MTIME CTIME INO MODE HASH\nPATH\x00" per
// file, through a temporary file renamed over the old one.
func (c *hashCache) save(name string, entries []Entry, keys []statKey, start time.Time) error {
	if name == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	racy := start.Add(-racyWindow).UnixNano()
	buf := make([]byte, 0, len(entries)*96)
	for i, e := range entries {
		k := keys[i]
		if e.Hash == "" || k.CTime >= racy || k.MTime >= racy {
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
		buf = append(buf, '\n')
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

// writeManifest lists the copy's files (only, when onlyMode) with their
// hashes; cacheFile, when set, remembers hashes between calls.
func writeManifest(ctx context.Context, root *os.Root, only []string, onlyMode bool, cacheFile string, w io.Writer) error {
	start := time.Now()
	cache := loadCache(cacheFile)
	var entries []Entry
	var keys []statKey
	add := func(p string, st tools.FileStat) {
		if !st.Mode.IsRegular() && st.Mode&fs.ModeSymlink == 0 {
			return
		}
		k := keyOf(st)
		e := Entry{Path: p, Mode: k.Mode, Size: st.Size}
		if c, ok := cache.entries[p]; ok && c.key == k {
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
		err := tools.WalkStat(ctx, root, tools.WalkOptions{DirLinks: true}, func(p string, st tools.FileStat) error {
			add(p, st)
			return nil
		})
		if err != nil {
			return fmt.Errorf("walk the workspace copy: %w", err)
		}
	}
	if err := hashMissing(ctx, root, entries); err != nil {
		return err
	}
	var buf []byte
	for _, e := range entries {
		if e.Hash == "" { // gone while it was read
			continue
		}
		buf = appendEntry(buf[:0], e)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	if !onlyMode {
		_ = cache.save(cacheFile, entries, keys, start) // a cache that cannot be written costs only time
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
