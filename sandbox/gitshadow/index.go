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

// indexEntries checks an index (see validateIndex) and returns its
// entries.
func indexEntries(b []byte) ([]indexEntry, error) {
	var out []indexEntry
	if len(b) < 12+20 {
		return nil, errors.New("index too short")
	}
	if !bytes.Equal(b[:4], []byte("DIRC")) {
		return nil, errors.New("not an index")
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("index version %d", version)
	}
	body, sum := b[:len(b)-20], b[len(b)-20:]
	if got := sha1.Sum(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("index checksum mismatch")
	}
	count := int(binary.BigEndian.Uint32(b[8:12]))
	pos := 12
	prev := ""
	for i := 0; i < count; i++ {
		const fixed = 62 // stat data (40), object id (20), flags (2)
		if pos+fixed > len(body) {
			return nil, errors.New("index truncated")
		}
		mode := binary.BigEndian.Uint32(b[pos+24:])
		flags := binary.BigEndian.Uint16(b[pos+60:])
		start := pos
		pos += fixed
		if flags&0x4000 != 0 {
			if version < 3 {
				return nil, errors.New("extended flags in a version 2 index")
			}
			pos += 2 // skip-worktree and intent-to-add bits
		}
		var name string
		if version == 4 {
			strip, n := readV4Varint(b[pos:])
			if n <= 0 || int(strip) > len(prev) {
				return nil, errors.New("index path compression out of range")
			}
			pos += n
			end := bytes.IndexByte(b[pos:len(body)], 0)
			if end < 0 {
				return nil, errors.New("index path unterminated")
			}
			name = prev[:len(prev)-int(strip)] + string(b[pos:pos+end])
			pos += end + 1
		} else {
			end := bytes.IndexByte(b[pos:len(body)], 0)
			if end < 0 {
				return nil, errors.New("index path unterminated")
			}
			name = string(b[pos : pos+end])
			pos += end + 1
			// Entries are padded with NULs to a multiple of 8 bytes.
			for (pos-start)%8 != 0 {
				pos++
			}
			if pos > len(body) {
				return nil, errors.New("index truncated")
			}
		}
		if err := checkIndexPath(name); err != nil {
			return nil, err
		}
		switch mode {
		case 0o100644, 0o100755, 0o120000, gitlinkMode:
		default:
			return nil, fmt.Errorf("index entry %q has mode %o", name, mode)
		}
		if mode == 0o120000 && strings.EqualFold(lastComponent(name), ".gitmodules") {
			return nil, fmt.Errorf("index entry %q: .gitmodules as a symlink", name)
		}
		e := indexEntry{path: name, mode: mode, stage: (flags >> 12) & 3}
		copy(e.oid[:], b[start+40:start+60])
		out = append(out, e)
		prev = name
	}
	// Extensions: a 4-byte signature and a 4-byte size each.
	for pos < len(body) {
		if pos+8 > len(body) {
			return nil, errors.New("index extension truncated")
		}
		sig := string(b[pos : pos+4])
		size := int(binary.BigEndian.Uint32(b[pos+4:]))
		switch sig {
		case "link":
			return nil, errors.New("split index")
		case "sdir":
			return nil, errors.New("sparse index")
		}
		pos += 8 + size
		if pos > len(body) || size < 0 {
			return nil, errors.New("index extension truncated")
		}
	}
	return out, nil
}

// newGitlinks lists the gitlinks (submodule entries) of the index b that
// the index base has not, sorted. A base that is missing or does not parse
// has none.
func newGitlinks(b, base []byte) []string {
	entries, err := indexEntries(b)
	if err != nil {
		return nil
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
