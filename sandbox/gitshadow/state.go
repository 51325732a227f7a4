package gitshadow

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// The files of a git directory the shadow mirrors, relative to that git
// directory. Everything else in the shadow stays in the sandbox.
var (
	// worktreeFiles belong to one worktree: where it is and what is staged.
	worktreeFiles = []string{"HEAD", "index", "ORIG_HEAD", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "CHERRY_PICK_HEAD", "REVERT_HEAD"}
	// sharedFiles belong to the repository; loose refs (refsDir) too.
	sharedFiles = []string{"packed-refs", "shallow", "logs/refs/stash"}
	// hostFiles and hostDirs go from the host into the shadow, never back:
	// configuration and hooks decide what git runs.
	hostFiles = []string{"config", "config.worktree", "commondir", "gitdir"}
	hostDirs  = []string{"hooks", "info"}
)

const refsDir = "refs"

// Layout says which git directories a shadow holds, relative to the
// common directory, and which of them belongs to the workspace's worktree.
type Layout struct {
	// GitDirs: "" (the common directory), then a linked worktree's and the
	// submodules' (Repo.GitDirs).
	GitDirs []string
	// Worktree is the linked worktree's git directory, "" when the
	// workspace is the main worktree.
	Worktree string
}

// LayoutOf is the layout of a discovered repository.
func LayoutOf(r *Repo) Layout { return Layout{GitDirs: r.GitDirs(), Worktree: r.Worktree} }

// Validate refuses git directory names that could leave the shadow.
func (l Layout) Validate() error {
	if len(l.GitDirs) == 0 || l.GitDirs[0] != "" {
		return errors.New("layout: the common directory must come first")
	}
	for _, d := range l.GitDirs[1:] {
		if !validRel(d) {
			return fmt.Errorf("layout: bad git directory %q", d)
		}
	}
	return nil
}

// mirrored reports how a path (relative to the common directory) is
// mirrored: both ways, only from the host, or not at all.
type direction int

const (
	notMirrored direction = iota
	bothWays
	fromHost
)

// classify says how rel is mirrored under the layout.
func (l Layout) classify(rel string) direction {
	gitDir, name := l.split(rel)
	if name == "" || strings.HasSuffix(name, ".lock") {
		// A lock is a git's write in progress on its side: copied, it
		// would hold the other side's git off for good.
		return notMirrored
	}
	linked := l.Worktree != "" && gitDir == l.Worktree
	switch {
	case contains(worktreeFiles, name):
		if gitDir == "" && l.Worktree != "" {
			return fromHost // the main worktree's HEAD, seen by the linked one
		}
		return bothWays
	case contains(sharedFiles, name), strings.HasPrefix(name, refsDir+"/"):
		if linked {
			return notMirrored // a linked worktree's refs live in the common directory
		}
		return bothWays
	case contains(hostFiles, name):
		return fromHost
	}
	for _, d := range hostDirs {
		if strings.HasPrefix(name, d+"/") {
			return fromHost
		}
	}
	return notMirrored
}

// split returns the git directory rel lies in (the longest of the layout's
// that contains it) and the path inside it.
func (l Layout) split(rel string) (gitDir, name string) {
	best := ""
	for _, d := range l.GitDirs[1:] {
		if strings.HasPrefix(rel, d+"/") && len(d) > len(best) {
			best = d
		}
	}
	if best == "" {
		return "", rel
	}
	return best, strings.TrimPrefix(rel, best+"/")
}

// candidates lists every path of the layout that may hold a mirrored file,
// directories (refs, hooks, info) as "dir/" to walk.
func (l Layout) candidates() []string {
	var out []string
	for _, d := range l.GitDirs {
		pre := ""
		if d != "" {
			pre = d + "/"
		}
		for _, lists := range [][]string{worktreeFiles, sharedFiles, hostFiles} {
			for _, f := range lists {
				out = append(out, pre+f)
			}
		}
		for _, dir := range append([]string{refsDir}, hostDirs...) {
			out = append(out, pre+dir+"/")
		}
	}
	return out
}

// maxMirroredFile caps one mirrored file (an index of a very large tree is
// tens of megabytes).
const maxMirroredFile = 512 << 20

// Snapshot is the mirrored files of one side: path relative to the common
// directory → content.
type Snapshot map[string][]byte

// ReadSnapshot reads every mirrored file under root (a common directory)
// that exists. Symlinks and anything but regular files are skipped: git
// writes these files as regular files, and a symlink would make shiro read
// elsewhere.
func ReadSnapshot(root string, l Layout) (Snapshot, error) {
	snap := Snapshot{}
	err := l.visit(root, func(rel string, fi fs.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return nil
		}
		if l.classify(rel) == notMirrored {
			return nil
		}
		b, err := readRegular(filepath.Join(root, filepath.FromSlash(rel)), maxMirroredFile)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone meanwhile
			}
			return err
		}
		snap[rel] = b
		return nil
	})
	return snap, err
}

// visit calls fn for every existing candidate file of the layout under
// root, walking the candidate directories without following symlinks.
func (l Layout) visit(root string, fn func(rel string, fi fs.FileInfo) error) error {
	for _, c := range l.candidates() {
		if dir, ok := strings.CutSuffix(c, "/"); ok {
			if err := walkFiles(root, dir, fn); err != nil {
				return err
			}
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(c)))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				continue
			}
			return err
		}
		if err := fn(c, fi); err != nil {
			return err
		}
	}
	return nil
}

// walkFiles calls fn for every non-directory below root/dir, never
// following a symlink.
func walkFiles(root, dir string, fn func(rel string, fi fs.FileInfo) error) error {
	abs := filepath.Join(root, filepath.FromSlash(dir))
	entries, err := os.ReadDir(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		rel := dir + "/" + e.Name()
		if e.IsDir() {
			if err := walkFiles(root, rel, fn); err != nil {
				return err
			}
			continue
		}
		fi, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if err := fn(rel, fi); err != nil {
			return err
		}
	}
	return nil
}

// Fingerprint summarises the metadata of every mirrored file under root
// (and of the directories new submodules or worktrees would appear in):
// when it is unchanged, so is the mirrored state. It reads no contents.
func Fingerprint(root string, l Layout) string {
	h := sha256.New()
	_ = l.visit(root, func(rel string, fi fs.FileInfo) error {
		fmt.Fprintf(h, "%s\x00%s\x00", rel, statKey(fi))
		return nil
	})
	for _, d := range l.GitDirs {
		for _, sub := range []string{"modules", "worktrees", "objects/pack"} {
			if fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(path.Join(d, sub)))); err == nil {
				fmt.Fprintf(h, "%s/%s\x00%s\x00", d, sub, statKey(fi))
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// statKey is what a fingerprint records of one file.
func statKey(fi fs.FileInfo) string {
	ino, ctime := fileID(fi)
	return fmt.Sprintf("%o %d %d %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), ino, ctime)
}

// readRegular reads a regular file without following a symlink, up to max
// bytes.
func readRegular(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, max)
	}
	return b, nil
}

// validRel reports a clean relative slash path that stays below its root.
func validRel(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || strings.Contains(p, "\\") {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sortedKeys returns a snapshot's paths in order.
func (s Snapshot) sortedKeys() []string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
