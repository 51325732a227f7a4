package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/tools/mcp"
)

// What a trust record covers beyond the command line: the workspace files
// the ask may run. A server's command line names them (`sh .shiro/lint.sh`,
// `node tools/srv/index.js`, `-c "exec ./bin/srv"`, a cwd); what runs may
// read the files beside them (a script sourcing `.shiro/lib.sh`). So an
// ask covers
//
//   - every workspace path that its command, an argument, a word of an
//     argument or its cwd names,
//   - for a named directory, every file under it,
//   - for a named file, every file under the directory it lives in (only
//     the files directly in it when that is the workspace's top: the whole
//     workspace would make every edit a new question),
//
// each by a hash of its content, read through the confined reader (a
// symlink that leaves the workspace is recorded as such, never followed).
// Git directories are left out. Code the server loads from elsewhere
// (installed packages, the network, a path built at run time) is not
// covered: docs/configuration.md says so.
const (
	// maxCoveredFiles (files, and directories walked) and maxCoveredBytes
	// bound what one ask hashes; past them the record says so
	// (coverCapped) and the rest is not covered.
	maxCoveredFiles = 4000
	maxCoveredBytes = 128 << 20
	coverCapped     = "…"
)

// coverage collects the hashes of one ask's files.
type coverage struct {
	tree  confine.Tree
	files map[string]string
	dirs  map[string]bool // directories walked (true: with subdirectories)
	bytes int64
}

// mcpFiles is what a stdio server's command line covers in workspace w.
func mcpFiles(w *workspace.Workspace, c mcp.Config) map[string]string {
	ws, cv := w.Path(), newCoverage(w)
	base := "."
	if c.Cwd != "" {
		if rel, ok := inside(ws, ".", c.Cwd); ok {
			base = rel
			cv.name(rel)
		}
	}
	for _, arg := range append([]string{c.Command}, c.Args...) {
		for _, w := range words(arg) {
			if rel, ok := inside(ws, base, w); ok {
				cv.name(rel)
			}
		}
	}
	return cv.result()
}

// buildFiles is what a project build covers: the Dockerfile and the
// devcontainer.json, with the files beside them.
func buildFiles(w *workspace.Workspace, paths ...string) map[string]string {
	ws, cv := w.Path(), newCoverage(w)
	for _, p := range paths {
		if rel, ok := inside(ws, ".", p); ok && p != "" {
			cv.name(rel)
		}
	}
	return cv.result()
}

// newCoverage collects hashes of w's files, read through its root.
func newCoverage(w *workspace.Workspace) *coverage {
	return &coverage{tree: confine.Tree{Root: w.Root(), Name: "the workspace"}, files: map[string]string{}, dirs: map[string]bool{}}
}

func (cv *coverage) result() map[string]string {
	if len(cv.files) == 0 {
		return nil
	}
	return cv.files
}

// words are arg and, when it holds more than one, the words a shell would
// split it into (well enough to find the paths in `-c "exec ./srv"`), with
// the value of a --flag=value.
func words(arg string) []string {
	ws := []string{arg}
	split := strings.FieldsFunc(arg, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || strings.ContainsRune(";&|()<>'\"`", r)
	})
	for _, w := range split {
		if _, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(w, "-") {
			w = v
		}
		if w != arg {
			ws = append(ws, w)
		}
	}
	return ws
}

// inside turns p (absolute, or relative to base inside ws) into a
// slash-separated path relative to ws, when it stays inside.
func inside(ws, base, p string) (string, bool) {
	if p == "" {
		return "", false
	}
	var rel string
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(filepath.Clean(ws), filepath.Clean(p))
		if err != nil {
			return "", false
		}
		rel = r
	} else {
		rel = filepath.Join(filepath.FromSlash(base), p)
	}
	if !filepath.IsLocal(rel) && rel != "." {
		return "", false
	}
	return filepath.ToSlash(filepath.Clean(rel)), true
}

// name covers what rel names, if it exists: a directory with everything
// under it (only its own files for the top), a file with the files of its
// directory.
func (cv *coverage) name(rel string) {
	fi, err := cv.tree.Root.Stat(filepath.FromSlash(rel))
	if err != nil {
		return // nothing there (or a symlink out): the name is not a file of the workspace
	}
	if fi.IsDir() {
		cv.walk(rel, rel != ".")
		return
	}
	dir := path.Dir(rel)
	cv.walk(dir, dir != ".")
	cv.add(rel) // a file of a directory that was cut short, or itself a symlink
}

// walk covers the files of dir, and of its subdirectories when deep.
func (cv *coverage) walk(dir string, deep bool) {
	if done, ok := cv.dirs[dir]; ok && (done || !deep) {
		return
	}
	if len(cv.dirs) >= maxCoveredFiles {
		cv.files[coverCapped] = "more than shiro hashes for one ask; the rest is not covered"
		return
	}
	cv.dirs[dir] = deep
	ents, err := cv.tree.ReadDir(dir)
	if err != nil {
		cv.files[dir+"/"] = "not read: " + err.Error()
		return
	}
	for _, e := range ents {
		if _, capped := cv.files[coverCapped]; capped {
			return
		}
		p := path.Join(dir, e.Name())
		switch {
		case e.Name() == ".git":
		case e.IsDir():
			if deep {
				cv.walk(p, true)
			}
		default:
			cv.add(p)
		}
	}
}

// add records the hash of the file rel (a symlink by its target).
func (cv *coverage) add(rel string) {
	if _, ok := cv.files[rel]; ok {
		return
	}
	if len(cv.files) >= maxCoveredFiles || cv.bytes >= maxCoveredBytes {
		cv.files[coverCapped] = "more than shiro hashes for one ask; the rest is not covered"
		return
	}
	name := filepath.FromSlash(rel)
	prefix := ""
	if fi, err := cv.tree.Root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := cv.tree.Root.Readlink(name)
		prefix = "symlink to " + target + ": "
	}
	cv.files[rel] = prefix + cv.digest(rel)
}

// digest is the hash of rel's content, or why it was not read (the
// reason is part of the record: a file that becomes readable is a
// change).
func (cv *coverage) digest(rel string) string {
	f, err := cv.tree.Open(rel)
	if err != nil {
		if r, ok := confine.AsRefusal(err); ok {
			return "not read: " + r.Reason
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "missing"
		}
		return "not read"
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxCoveredBytes-cv.bytes+1))
	cv.bytes += n
	if err != nil {
		return "not read"
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// fileChanges lists the files of now that differ from what trusted
// covered: changed ones and ones it did not cover. A file that is gone is
// not a change (nothing of it can run), nor is a new file directly in the
// workspace's top: the top is covered only for the files it had, or every
// new file of a repository (and every file a server writes beside itself)
// would ask again. A decision from before files were covered covers none.
func fileChanges(trusted, now Ask) (changed, added []string) {
	for p, h := range now.Files {
		old, ok := trusted.Files[p]
		switch {
		case !ok && trusted.Files != nil && !strings.Contains(p, "/"):
		case !ok:
			added = append(added, p)
		case old != h:
			changed = append(changed, p)
		}
	}
	slices.Sort(changed)
	slices.Sort(added)
	return changed, added
}
