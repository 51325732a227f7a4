// Package gitrepo reads a git repository with go-git, in this process:
// no git program runs, so nothing the repository configures (hooks,
// core.fsmonitor, clean/smudge filters, diff drivers, textconv) ever runs.
// The git tools use it under --no-sandbox and when the sandbox image has
// no git. Its output follows git's formats where go-git allows; the
// differences are listed in docs/tools.md.
package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	fdiff "github.com/go-git/go-git/v5/plumbing/format/diff"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/diff"
	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/shiroagent/shiro/tools"
)

// ErrNotRepository is the error of a workspace in no repository.
var ErrNotRepository = tools.ErrNotRepository

// Opener opens repositories for the git tools (tools.Env.OpenGit).
func Opener(ws string, root *os.Root) (tools.GitRepo, error) {
	r, err := Open(ws, root)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Repo is an open repository with its worktree.
type Repo struct {
	r    *git.Repository
	root *os.Root // the worktree
	pre  string   // the workspace's path inside the worktree ("" at its root)
}

// Open opens the repository that holds the workspace ws (its directory or
// an ancestor's .git), reading worktree files through root.
func Open(ws string, root *os.Root) (*Repo, error) {
	r, err := git.PlainOpenWithOptions(ws, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, ErrNotRepository
	}
	if err != nil {
		return nil, fmt.Errorf("open the repository: %w", err)
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, ErrNotRepository // a bare repository
	}
	pre := ""
	if top := wt.Filesystem.Root(); top != ws {
		pre = strings.TrimPrefix(strings.TrimPrefix(ws, top), "/")
	}
	return &Repo{r: r, root: root, pre: pre}, nil
}

// Branch is what `git rev-parse --abbrev-ref HEAD` says: the branch, the
// unborn branch of a repository without commits, or HEAD when detached.
func (g *Repo) Branch() (string, error) {
	ref, err := g.r.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return "", err
	}
	if ref.Type() == plumbing.SymbolicReference {
		return ref.Target().Short(), nil
	}
	return "HEAD", nil
}

// Status is `git status --porcelain=v1`: "XY path" lines sorted by path.
// go-git lists each untracked file (git names an untracked directory
// once, "dir/").
func (g *Repo) Status() (string, error) {
	wt, err := g.r.Worktree()
	if err != nil {
		return "", err
	}
	st, err := wt.Status()
	if err != nil {
		return "", fmt.Errorf("git status: %w", err)
	}
	paths := make([]string, 0, len(st))
	for p, s := range st {
		if s.Staging == git.Unmodified && s.Worktree == git.Unmodified {
			continue
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		s := st[p]
		x, y := byte(s.Staging), byte(s.Worktree)
		if s.Staging == git.Untracked {
			x, y = '?', '?'
		}
		fmt.Fprintf(&b, "%c%c %s\n", x, y, p)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// under reports whether p is the path filter or below it.
func under(p, filter string) bool {
	filter = strings.Trim(path.Clean("/"+filter), "/")
	return filter == "" || p == filter || strings.HasPrefix(p, filter+"/")
}

// repoPath turns a workspace-relative filter into a repository path.
func (g *Repo) repoPath(p string) string {
	if p == "" {
		return g.pre
	}
	return strings.Trim(path.Join(g.pre, p), "/")
}

// Diff is `git diff` (staged: `git diff --staged`) limited to filter: the
// worktree against the index, or the index against HEAD.
func (g *Repo) Diff(staged bool, filter string) (string, error) {
	wt, err := g.r.Worktree()
	if err != nil {
		return "", err
	}
	st, err := wt.Status()
	if err != nil {
		return "", fmt.Errorf("git diff: %w", err)
	}
	idx, err := g.r.Storer.Index()
	if err != nil {
		return "", fmt.Errorf("read the index: %w", err)
	}
	inIndex := map[string]plumbing.Hash{}
	modes := map[string]filemode.FileMode{}
	for _, e := range idx.Entries {
		inIndex[e.Name], modes[e.Name] = e.Hash, e.Mode
	}
	var head *object.Tree
	if ref, err := g.r.Head(); err == nil {
		if c, err := g.r.CommitObject(ref.Hash()); err == nil {
			head, _ = c.Tree()
		}
	}
	filter = g.repoPath(filter)
	var paths []string
	for p, s := range st {
		if !under(p, filter) {
			continue
		}
		if staged && s.Staging != git.Unmodified && s.Staging != git.Untracked {
			paths = append(paths, p)
		}
		if !staged && s.Worktree != git.Unmodified && s.Worktree != git.Untracked {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var patches []fdiff.FilePatch
	for _, p := range paths {
		var from, to *side
		if staged {
			if head != nil {
				if f, err := head.File(p); err == nil {
					from = g.blobSide(p, f.Hash, f.Mode)
				}
			}
			if h, ok := inIndex[p]; ok {
				to = g.blobSide(p, h, modes[p])
			}
		} else {
			if h, ok := inIndex[p]; ok {
				from = g.blobSide(p, h, modes[p])
			}
			to = g.worktreeSide(p)
		}
		patches = append(patches, newFilePatch(from, to))
	}
	return encode(patches, "")
}

// side is one side of a file patch.
type side struct {
	path    string
	hash    plumbing.Hash
	mode    filemode.FileMode
	content []byte
}

func (s *side) Hash() plumbing.Hash     { return s.hash }
func (s *side) Mode() filemode.FileMode { return s.mode }
func (s *side) Path() string            { return s.path }

func (g *Repo) blobSide(p string, h plumbing.Hash, mode filemode.FileMode) *side {
	s := &side{path: p, hash: h, mode: mode}
	if b, err := g.r.BlobObject(h); err == nil {
		if rd, err := b.Reader(); err == nil {
			s.content, _ = io.ReadAll(rd)
			rd.Close()
		}
	}
	return s
}

// worktreeSide reads the worktree file p through the root (nil when gone).
func (g *Repo) worktreeSide(p string) *side {
	rel := strings.TrimPrefix(strings.TrimPrefix(p, g.pre), "/")
	if g.pre != "" && !strings.HasPrefix(p, g.pre+"/") {
		return nil // outside the workspace: not readable through the root
	}
	fi, err := g.root.Lstat(rel)
	if err != nil {
		return nil
	}
	s := &side{path: p, mode: filemode.Regular}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		s.mode = filemode.Symlink
		t, _ := g.root.Readlink(rel)
		s.content = []byte(t)
	case fi.Mode().IsRegular():
		if fi.Mode()&0o111 != 0 {
			s.mode = filemode.Executable
		}
		s.content, _ = g.root.ReadFile(rel)
	default:
		return nil
	}
	s.hash = plumbing.ComputeHash(plumbing.BlobObject, s.content)
	return s
}

// filePatch is one file's patch over contents in memory.
type filePatch struct {
	from, to *side
	binary   bool
	chunks   []fdiff.Chunk
}

type chunk struct {
	content string
	op      fdiff.Operation
}

func (c chunk) Content() string            { return c.content }
func (c chunk) Type() fdiff.Operation      { return c.op }
func (p *filePatch) IsBinary() bool        { return p.binary }
func (p *filePatch) Chunks() []fdiff.Chunk { return p.chunks }
func (p *filePatch) Files() (fdiff.File, fdiff.File) {
	var from, to fdiff.File
	if p.from != nil {
		from = p.from
	}
	if p.to != nil {
		to = p.to
	}
	return from, to
}

func isBinary(b []byte) bool { return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 }

func newFilePatch(from, to *side) *filePatch {
	fp := &filePatch{from: from, to: to}
	var a, b []byte
	if from != nil {
		a = from.content
	}
	if to != nil {
		b = to.content
	}
	if isBinary(a) || isBinary(b) {
		fp.binary = true
		return fp
	}
	for _, d := range diff.Do(string(a), string(b)) {
		op := fdiff.Equal
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			op = fdiff.Delete
		case diffmatchpatch.DiffInsert:
			op = fdiff.Add
		}
		fp.chunks = append(fp.chunks, chunk{content: d.Text, op: op})
	}
	return fp
}

type patch struct {
	files   []fdiff.FilePatch
	message string
}

func (p patch) FilePatches() []fdiff.FilePatch { return p.files }
func (p patch) Message() string                { return p.message }

func encode(files []fdiff.FilePatch, message string) (string, error) {
	var buf bytes.Buffer
	if err := fdiff.NewUnifiedEncoder(&buf, fdiff.DefaultContextLines).Encode(patch{files: files, message: message}); err != nil {
		return "", err
	}
	return buf.String(), nil
}
