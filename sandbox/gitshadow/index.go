package gitshadow

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/shiroagent/shiro/internal/hostwrite"
)

// validateIndex checks an index file the sandbox wrote before it may
// replace the host's: the format (versions 2 to 4), the trailing checksum,
// and every path — none may leave the worktree or enter a .git, whatever
// its case. Split and sparse indexes are refused (they depend on other
// files or on a mode shiro does not mirror).
func validateIndex(b []byte) error {
	_, err := indexEntries(b)
	return err
}

// indexEntry is what an index says of one path, without the stat data
// git refreshes on every status.
type indexEntry struct {
	path  string
	mode  uint32
	oid   [20]byte
	stage uint16
}

// sameStaging reports whether two indexes stage the same content (paths,
// modes, object ids, stages), whatever their stat data and extensions:
// a git status on the host rewrites the index without changing what is
// staged.
func sameStaging(a, b []byte) bool {
	ea, erra := indexEntries(a)
	eb, errb := indexEntries(b)
	return erra == nil && errb == nil && slices.Equal(ea, eb)
}

// maxIndexNames caps the bytes of all the paths of one index. In a
// version 2 or 3 index they are bounded by the file; version 4 writes each
// path as a suffix of the one before, so 60-odd bytes of the file can make
// a path as long as the last plus one byte, and the paths' total grows
// with the square of the entries.
const maxIndexNames = maxMirroredFile

// indexEntries checks an index (see validateIndex) and returns its
// entries.
func indexEntries(b []byte) ([]indexEntry, error) {
	return decodeIndex(b, maxIndexNames)
}

// decodeIndex decodes an index with go-git's decoder, which reads the
// versions 2 to 4, each entry as git does (a version 2 or 3 path as long
// as its flags say, a version 4 path from the previous one and a prefix
// length it checks), the extensions (refusing a mandatory one it does not
// know: a split or sparse index) and the checksum of what it read. Around
// it: the checksum of the whole file (the decoder leaves up to 27 bytes
// after it unread), the total of the paths of a version 4 index before
// they are built, and every path and mode.
func decodeIndex(b []byte, maxNames int64) ([]indexEntry, error) {
	if len(b) < 12+20 {
		return nil, errors.New("index too short")
	}
	if got := sha1.Sum(b[:len(b)-20]); !bytes.Equal(got[:], b[len(b)-20:]) {
		return nil, errors.New("index checksum mismatch")
	}
	if bytes.Equal(b[:4], []byte("DIRC")) && binary.BigEndian.Uint32(b[4:8]) == 4 {
		if err := v4NamesWithin(b[:len(b)-20], maxNames); err != nil {
			return nil, err
		}
	}
	var idx index.Index
	if err := index.NewDecoder(bytes.NewReader(b)).Decode(&idx); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	out := make([]indexEntry, 0, len(idx.Entries))
	for _, e := range idx.Entries {
		// git reads a path as long as the entry says, but writes it out
		// as a C string: "a/.git\0x" is a/.git to the filesystem.
		if strings.IndexByte(e.Name, 0) >= 0 {
			return nil, fmt.Errorf("index entry %q: NUL in the path", e.Name)
		}
		if idx.Version == 2 && (e.SkipWorktree || e.IntentToAdd) {
			return nil, errors.New("extended flags in a version 2 index")
		}
		if err := checkIndexPath(e.Name); err != nil {
			return nil, err
		}
		mode := uint32(e.Mode)
		switch mode {
		case 0o100644, 0o100755, 0o120000, gitlinkMode:
		default:
			return nil, fmt.Errorf("index entry %q has mode %o", e.Name, mode)
		}
		if mode == 0o120000 && strings.EqualFold(lastComponent(e.Name), ".gitmodules") {
			return nil, fmt.Errorf("index entry %q: .gitmodules as a symlink", e.Name)
		}
		out = append(out, indexEntry{path: e.Name, mode: mode, oid: e.Hash, stage: uint16(e.Stage)})
	}
	return out, nil
}

// v4NamesWithin adds up the lengths of the paths of a version 4 index
// (body: the file without its checksum) without building them, and
// refuses one whose paths exceed limit bytes. Malformed entries are left to
// the decoder.
func v4NamesWithin(body []byte, limit int64) error {
	count := int(binary.BigEndian.Uint32(body[8:12]))
	pos, prev, total := 12, int64(0), int64(0)
	for range count {
		const fixed = 62 // stat data (40), object id (20), flags (2)
		if pos+fixed > len(body) {
			return nil
		}
		if binary.BigEndian.Uint16(body[pos+60:])&0x4000 != 0 {
			pos += 2 // extended flags
		}
		pos += fixed
		strip, n := readV4Varint(body[min(pos, len(body)):])
		end := bytes.IndexByte(body[min(pos+max(n, 0), len(body)):], 0)
		if n <= 0 || int64(strip) > prev || end < 0 {
			return nil
		}
		prev = prev - int64(strip) + int64(end)
		if total += prev; total > limit {
			return fmt.Errorf("index paths of more than %d bytes", limit)
		}
		pos += n + end + 1
	}
	return nil
}

// newGitlinks lists the gitlinks (submodule entries) of the index b that
// the index base has not, sorted. A base that is missing or does not parse
// has none.
func newGitlinks(b, base []byte) []string {
	entries, err := indexEntries(b)
	if err != nil || !slices.ContainsFunc(entries, func(e indexEntry) bool { return e.mode == gitlinkMode }) {
		return nil // no gitlinks: the base need not be decoded
	}
	known := map[string]bool{}
	if old, err := indexEntries(base); err == nil {
		for _, e := range old {
			if e.mode == gitlinkMode {
				known[e.path] = true
			}
		}
	}
	var out []string
	for _, e := range entries {
		if e.mode == gitlinkMode && !known[e.path] && !slices.Contains(out, e.path) {
			out = append(out, e.path)
		}
	}
	slices.Sort(out)
	return out
}

// IndexGitlinks lists the submodule paths (gitlinks) of the index of the
// workspace's worktree of r, relative to r.Top. A repository without an
// index has none.
func IndexGitlinks(r *Repo) ([]string, error) {
	dir := r.CommonDir
	if r.Worktree != "" {
		dir = filepath.Join(r.CommonDir, filepath.FromSlash(r.Worktree))
	}
	b, err := readRegular(filepath.Join(dir, "index"), maxMirroredFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return newGitlinks(b, nil), nil
}

// gitlinkMode is an index entry's mode for a submodule.
const gitlinkMode = 0o160000

// readV4Varint reads git's offset varint (the encoding of index v4 path
// prefixes and of OFS_DELTA offsets).
func readV4Varint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := uint64(c & 0x7f)
	n := 1
	for c&0x80 != 0 {
		if n >= len(b) || n > 9 {
			return 0, 0
		}
		c = b[n]
		n++
		v = ((v + 1) << 7) | uint64(c&0x7f)
	}
	return v, n
}

// checkIndexPath refuses a path git would refuse to check out, and any
// path into a .git directory under any spelling git treats as one.
func checkIndexPath(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "\\") {
		return fmt.Errorf("index entry %q: bad path", name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("index entry %q: bad path", name)
		}
		if IsDotGit(c) {
			return fmt.Errorf("index entry %q: inside .git", name)
		}
	}
	return nil
}

// IsDotGit matches ".git" and the spellings some filesystems treat as it;
// the rule is hostwrite.IsDotGit's, the one the write gate applies.
func IsDotGit(c string) bool { return hostwrite.IsDotGit(c) }

func lastComponent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
