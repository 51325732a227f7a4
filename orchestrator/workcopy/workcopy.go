// Package workcopy keeps a sandbox's copy of the workspace (copy mode) and
// the workspace itself in step. The copy is made when the sandbox first
// opens; the user's edits on this machine are carried into it before each
// turn; the sandbox's changes stay there until the user applies them.
//
// Three states are compared, each a tree in the workspace's checkpoint
// store: the base (what both sides last agreed on, file by file), the
// workspace now, and the copy now (its manifest; the files that differ
// from the base are fetched and hashed here). For each path:
//
//   - the workspace changed it and the copy did not: the workspace's
//     version goes into the copy;
//   - the copy changed it and the workspace did not: a change to apply;
//   - both changed it, differently: a conflict, shown and never
//     overwritten on either side.
//
// Applying writes only the paths applied (through the store, which records
// a checkpoint first), and never a path that would make a git repository
// on this machine or a symlink that leads out of the workspace.
package workcopy

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/tools/copymode"
)

// Options configure a Copy.
type Options struct {
	// Remote runs the copy-mode commands in the sandbox.
	Remote *copymode.Remote
	// Store is the workspace's checkpoint store: it scans the workspace
	// and holds every state's files.
	Store *checkpoint.Store
	// Root is the workspace.
	Root *os.Root
	// StateFile keeps the base between sessions.
	StateFile string
	// MaxFileSize bounds the files carried either way after the first
	// copy (default checkpoint.DefaultMaxFileSize).
	MaxFileSize int64
}

// Copy is one workspace's copy in one sandbox. Its methods take turns.
type Copy struct {
	opts Options

	mu   sync.Mutex
	base string // the tree both sides last agreed on
	// baseFiles are base's files, read once, kept in step with it.
	baseFiles map[string]checkpoint.TreeFile
	// seen is the copy as its last manifest said, gen that manifest's
	// generation: the next manifest says only what changed since.
	seen map[string]copymode.Entry
	gen  string
}

// state is what StateFile holds.
type state struct {
	Base string `json:"base"`
}

// Open makes the copy in the sandbox if it has none (or lost it), or
// brings the workspace's changes since the last session into it. It
// returns notices for the user (conflicts, files too large to carry).
func Open(ctx context.Context, opts Options) (*Copy, []string, error) {
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = checkpoint.DefaultMaxFileSize
	}
	c := &Copy{opts: opts}
	var st state
	if data, err := os.ReadFile(opts.StateFile); err == nil {
		_ = json.Unmarshal(data, &st) // a damaged state file means a fresh copy
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.Base != "" {
		if err := c.readCopy(ctx); err != nil {
			return nil, nil, err
		}
		if len(c.seen) > 0 {
			c.base = st.Base
			notices, err := c.sync(ctx)
			return c, notices, err
		}
		// The sandbox's storage is new: the copy is made again.
	}
	notices, err := c.copyIn(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, notices, nil
}

// copyIn copies every file the walker lists into the sandbox (large files
// too), and the repository's .git directory when the workspace holds one.
func (c *Copy) copyIn(ctx context.Context) ([]string, error) {
	now, err := c.opts.Store.Current(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan the workspace: %w", err)
	}
	files, err := c.opts.Store.Files(ctx, now.Tree)
	if err != nil {
		return nil, err
	}
	var large []string
	for p := range now.Skipped {
		large = append(large, p)
	}
	sort.Strings(large)
	hidden := c.unlistedIgnoreFiles(files)
	err = c.opts.Remote.Unpack(ctx, func(tw *tar.Writer) error {
		for _, f := range files {
			data, err := c.opts.Store.Blob(f.Hash)
			if err != nil {
				return err
			}
			if err := writeEntry(tw, f.Path, f.Mode, data); err != nil {
				return err
			}
		}
		for _, p := range append(large, hidden...) {
			if err := copymode.PackRegular(tw, c.opts.Root, p); err != nil {
				return err
			}
		}
		return c.packGitDir(tw)
	})
	if err != nil {
		return nil, fmt.Errorf("copy the workspace into the sandbox: %w", err)
	}
	if err := c.setBase(now.Tree, nil); err != nil {
		return nil, err
	}
	var notices []string
	if len(large) > 0 {
		notices = append(notices, fmt.Sprintf("%d files over %d MiB were copied into the sandbox once; their later changes are not carried either way: %s",
			len(large), c.opts.MaxFileSize>>20, strings.Join(clipList(large, 5), ", ")))
	}
	return notices, nil
}

// unlistedIgnoreFiles are the ignore files the walker read but does not
// list (a .gitignore that a rule ignores still holds rules, as in git):
// the copy needs them to list the same files.
func (c *Copy) unlistedIgnoreFiles(files []checkpoint.TreeFile) []string {
	listed := make(map[string]bool, len(files))
	dirs := map[string]bool{".": true}
	for _, f := range files {
		listed[f.Path] = true
		for d := path.Dir(f.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var out []string
	for d := range dirs {
		for _, name := range []string{".gitignore", ".shiroignore"} {
			p := name
			if d != "." {
				p = d + "/" + name
			}
			if listed[p] {
				continue
			}
			if fi, err := c.opts.Root.Lstat(p); err == nil && fi.Mode().IsRegular() {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// writeEntry adds a file (or symlink) to a tar for the sandbox.
func writeEntry(tw *tar.Writer, p string, mode fs.FileMode, data []byte) error {
	if mode&fs.ModeSymlink != 0 {
		return tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeSymlink, Linkname: string(data), Mode: 0o777})
	}
	if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: int64(mode.Perm()), Size: int64(len(data))}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// packGitDir adds the workspace's .git directory, when it is one (not a
// gitfile or a symlink: a repository whose git directory lies elsewhere
// has none in the copy). The copy's repository is the sandbox's from then
// on: its commits stay there, and applying carries files only.
func (c *Copy) packGitDir(tw *tar.Writer) error {
	fi, err := c.opts.Root.Lstat(".git")
	if err != nil || !fi.IsDir() {
		return nil
	}
	return fs.WalkDir(c.opts.Root.FS(), ".git", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable part of .git stays behind
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Name: p + "/", Typeflag: tar.TypeDir, Mode: 0o755})
		case d.Type()&fs.ModeSymlink != 0:
			target, err := c.opts.Root.Readlink(p)
			if err != nil {
				return nil
			}
			return tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777})
		case d.Type().IsRegular():
			return copymode.PackRegular(tw, c.opts.Root, p)
		}
		return nil
	})
}

// setBase takes tree for the base; files are its files when the caller
// has them (nil: read them when next needed).
func (c *Copy) setBase(tree string, files map[string]checkpoint.TreeFile) error {
	c.base, c.baseFiles = tree, files
	data, _ := json.Marshal(state{Base: tree})
	if err := os.MkdirAll(filepath.Dir(c.opts.StateFile), 0o700); err != nil {
		return fmt.Errorf("save the copy's state: %w", err)
	}
	if err := atomicfile.WriteFile(c.opts.StateFile, data, 0o600); err != nil {
		return fmt.Errorf("save the copy's state: %w", err)
	}
	return nil
}

// Sync carries the workspace's changes since the base into the copy,
// where the copy has not changed the same files; the rest are conflicts
// (notices).
func (c *Copy) Sync(ctx context.Context) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sync(ctx)
}

func (c *Copy) sync(ctx context.Context) ([]string, error) {
	st := c.opts.Store
	now, err := st.Current(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan the workspace: %w", err)
	}
	if now.Tree == c.base {
		return nil, nil
	}
	chs, err := st.Changes(ctx, checkpoint.Checkpoint{Tree: c.base}, checkpoint.Checkpoint{Tree: now.Tree})
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(chs))
	for i, ch := range chs {
		paths[i] = ch.Path
	}
	base, err := c.loadBase(ctx)
	if err != nil {
		return nil, err
	}
	host, err := st.Lookup(ctx, now.Tree, paths)
	if err != nil {
		return nil, err
	}
	there, err := c.opts.Remote.Manifest(ctx, paths)
	if err != nil {
		return nil, err
	}
	copyNow := map[string]checkpoint.TreeFile{}
	for _, e := range there {
		copyNow[e.Path] = checkpoint.TreeFile{Path: e.Path, Mode: e.Mode, Hash: e.Hash}
	}
	var write, remove, conflicts []string
	var agreed []checkpoint.TreeFile
	var gone []string
	for _, p := range paths {
		b, inBase := base[p]
		h, inHost := host[p]
		s, inCopy := copyNow[p]
		switch {
		case inCopy == inHost && (!inCopy || s == h):
			// Both sides agree already.
		case inCopy == inBase && (!inCopy || s == b):
			if inHost {
				write = append(write, p)
			} else {
				remove = append(remove, p)
			}
		default:
			conflicts = append(conflicts, p)
			continue
		}
		if inHost {
			agreed = append(agreed, h)
		} else {
			gone = append(gone, p)
		}
	}
	if len(write) > 0 {
		err := c.opts.Remote.Unpack(ctx, func(tw *tar.Writer) error {
			for _, p := range write {
				data, err := st.Blob(host[p].Hash)
				if err != nil {
					return err
				}
				if err := writeEntry(tw, p, host[p].Mode, data); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("carry your changes into the sandbox: %w", err)
		}
	}
	if err := c.opts.Remote.Remove(ctx, remove); err != nil {
		return nil, fmt.Errorf("carry your deletions into the sandbox: %w", err)
	}
	if err := c.editBase(agreed, gone); err != nil {
		return nil, err
	}
	var notices []string
	if len(conflicts) > 0 {
		notices = append(notices, conflictNotice(conflicts))
	}
	return notices, nil
}

// loadBase returns base's files, reading them the first time.
func (c *Copy) loadBase(ctx context.Context) (map[string]checkpoint.TreeFile, error) {
	if c.baseFiles != nil {
		return c.baseFiles, nil
	}
	files, err := c.filesOf(ctx, c.base)
	if err != nil {
		return nil, err
	}
	c.baseFiles = files
	return files, nil
}

// editBase puts set into the base and takes remove out of it.
func (c *Copy) editBase(set []checkpoint.TreeFile, remove []string) error {
	if len(set) == 0 && len(remove) == 0 {
		return nil
	}
	tree, err := c.opts.Store.EditTree(c.base, set, remove)
	if err != nil {
		return err
	}
	files := c.baseFiles
	if files != nil {
		for _, f := range set {
			files[f.Path] = f
		}
		for _, p := range remove {
			delete(files, p)
		}
	}
	return c.setBase(tree, files)
}

func conflictNotice(paths []string) string {
	return fmt.Sprintf("changed both here and in the sandbox, so left as they are on both sides: %s (/changes shows the sandbox's version)", strings.Join(clipList(paths, 8), ", "))
}

// filesOf is a tree's files by path.
func (c *Copy) filesOf(ctx context.Context, tree string) (map[string]checkpoint.TreeFile, error) {
	files, err := c.opts.Store.Files(ctx, tree)
	if err != nil {
		return nil, err
	}
	out := make(map[string]checkpoint.TreeFile, len(files))
	for _, f := range files {
		out[f.Path] = f
	}
	return out, nil
}

// clipList is the first n paths of list, each quoted when its name holds
// what a terminal would not show as it is (the sandbox chose it), and how
// many more there are.
func clipList(list []string, n int) []string {
	out := make([]string, 0, min(len(list), n)+1)
	for _, p := range list[:min(len(list), n)] {
		out = append(out, termsafe.Name(p))
	}
	if len(list) > n {
		out = append(out, fmt.Sprintf("and %d more", len(list)-n))
	}
	return out
}

// Changes is what the sandbox changed in its copy since the base.
type Changes struct {
	// Files are the changes, by path (Created, Deleted, Modified).
	Files []checkpoint.FileChange
	// Conflicts are paths of Files the workspace changed too, otherwise.
	Conflicts []string
	// Refused are paths of Files that are never applied, with the reason.
	Refused map[string]string
	// TooLarge are files the sandbox changed that are over the size
	// limit: not fetched, not applied.
	TooLarge []string

	base, copy string                         // trees
	files      map[string]checkpoint.TreeFile // the copy's version of each changed file
}

// Empty reports whether the sandbox changed nothing.
func (ch Changes) Empty() bool { return len(ch.Files) == 0 && len(ch.TooLarge) == 0 }

// Changes lists the sandbox's changes, fetching the contents it has not
// seen yet.
func (c *Copy) Changes(ctx context.Context) (Changes, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes(ctx)
}

func (c *Copy) changes(ctx context.Context) (Changes, error) {
	st := c.opts.Store
	if err := c.readCopy(ctx); err != nil {
		return Changes{}, err
	}
	base, err := c.loadBase(ctx)
	if err != nil {
		return Changes{}, err
	}
	out := Changes{base: c.base, Refused: map[string]string{}, files: map[string]checkpoint.TreeFile{}}
	var set []checkpoint.TreeFile
	var remove, fetch []string
	for p, e := range c.seen {
		b, inBase := base[p]
		if inBase && b.Hash == e.Hash && b.Mode == e.Mode {
			continue
		}
		if e.Mode&fs.ModeSymlink == 0 && e.Size > c.opts.MaxFileSize {
			out.TooLarge = append(out.TooLarge, p) // shown as unchanged: it is not carried
			continue
		}
		if st.HasBlob(e.Hash) {
			f := checkpoint.TreeFile{Path: p, Mode: e.Mode, Hash: e.Hash}
			set, out.files[p] = append(set, f), f
			continue
		}
		fetch = append(fetch, p)
	}
	for p := range base {
		if _, ok := c.seen[p]; !ok {
			remove = append(remove, p)
		}
	}
	// What the sandbox says is only a list of what to fetch: the content
	// is hashed here.
	asked := make(map[string]bool, len(fetch))
	for _, p := range fetch {
		asked[p] = true
	}
	got := map[string]bool{}
	err = c.opts.Remote.Pack(ctx, fetch, func(h *tar.Header, content io.Reader) error {
		var data []byte
		mode := fs.FileMode(0o644)
		switch h.Typeflag {
		case tar.TypeSymlink:
			data, mode = []byte(h.Linkname), fs.ModeSymlink
		case tar.TypeReg:
			if h.Size > c.opts.MaxFileSize {
				return fmt.Errorf("%s grew past the size limit while fetched", termsafe.Name(h.Name))
			}
			var err error
			if data, err = io.ReadAll(io.LimitReader(content, c.opts.MaxFileSize+1)); err != nil {
				return err
			}
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
		default:
			return nil
		}
		if !asked[h.Name] || got[h.Name] {
			return fmt.Errorf("the sandbox sent %s, which was not asked for", termsafe.Name(h.Name))
		}
		got[h.Name] = true
		hash, err := st.PutBlob(data)
		if err != nil {
			return err
		}
		f := checkpoint.TreeFile{Path: h.Name, Mode: mode, Hash: hash}
		set, out.files[h.Name] = append(set, f), f
		return nil
	})
	if err != nil {
		return Changes{}, fmt.Errorf("fetch the sandbox's changes: %w", err)
	}
	// A file that vanished between the manifest and the fetch counts as
	// gone.
	for _, p := range fetch {
		if !got[p] {
			if _, ok := base[p]; ok {
				remove = append(remove, p)
			}
		}
	}
	if out.copy, err = st.EditTree(c.base, set, remove); err != nil {
		return Changes{}, err
	}
	if out.Files, err = st.Changes(ctx, checkpoint.Checkpoint{Tree: out.base}, checkpoint.Checkpoint{Tree: out.copy}); err != nil {
		return Changes{}, err
	}
	now, err := st.Current(ctx)
	if err != nil {
		return Changes{}, fmt.Errorf("scan the workspace: %w", err)
	}
	paths := make([]string, len(out.Files))
	for i, f := range out.Files {
		paths[i] = f.Path
	}
	host, err := st.Lookup(ctx, now.Tree, paths)
	if err != nil {
		return Changes{}, err
	}
	for _, f := range out.Files {
		b, inBase := base[f.Path]
		h, inHost := host[f.Path]
		s, inCopy := out.files[f.Path]
		switch {
		case inHost == inBase && (!inHost || h == b):
			// The workspace still has the base's version.
		case inHost == inCopy && (!inHost || h == s):
			// It has the sandbox's already.
		default:
			out.Conflicts = append(out.Conflicts, f.Path)
		}
		if inCopy {
			why := refusal(f.Path, c.seen, c.opts.Root)
			if why == "" && s.Mode&fs.ModeSymlink != 0 {
				target, err := st.Blob(s.Hash)
				if err != nil {
					return Changes{}, err
				}
				if symlinkOut(f.Path, string(target)) {
					why = "a symlink to " + string(target) + ", outside the workspace"
				}
			}
			if why != "" {
				out.Refused[f.Path] = why
			}
		}
	}
	sort.Strings(out.TooLarge)
	return out, nil
}

// readCopy brings seen up to date: a delta from the last manifest, or a
// full one.
func (c *Copy) readCopy(ctx context.Context) error {
	m, err := c.opts.Remote.ManifestSince(ctx, c.gen)
	if err != nil {
		return err
	}
	if m.Full || c.seen == nil {
		c.seen = make(map[string]copymode.Entry, len(m.Entries))
		if !m.Full {
			c.gen = "" // a delta without its base: read it all next time
			return c.readCopy(ctx)
		}
	}
	for _, e := range m.Entries {
		c.seen[e.Path] = e
	}
	for _, p := range m.Deleted {
		delete(c.seen, p)
	}
	c.gen = m.Gen
	return nil
}

// refusal says why the sandbox's file at p must never be written here: a
// path into a .git directory (any spelling git accepts), or a file that
// makes its directory a git directory (all holds the copy's files). The
// rules are the write gate's (hostwrite), applied to what the copy holds;
// the gate applies them again to the workspace when the change is applied.
func refusal(p string, all map[string]copymode.Entry, root *os.Root) string {
	for _, c := range strings.Split(p, "/") {
		if hostwrite.IsDotGit(c) {
			return "it is inside a .git directory"
		}
	}
	for dir := path.Dir(p); ; dir = path.Dir(dir) {
		if gitDirShape(dir, all, root) {
			return fmt.Sprintf("it would make %s a git repository", displayDir(dir))
		}
		if dir == "." {
			break
		}
	}
	return ""
}

func displayDir(d string) string {
	if d == "." {
		return "the workspace"
	}
	return d + "/"
}

// gitDirShape reports whether dir, with the files all holds (and the
// directories the workspace has), is what git takes for a git directory
// (hostwrite.GitDirShape).
func gitDirShape(dir string, all map[string]copymode.Entry, root *os.Root) bool {
	at := func(name string) string {
		if dir == "." {
			return name
		}
		return dir + "/" + name
	}
	has := func(name string) bool {
		if _, ok := all[at(name)]; ok {
			return true
		}
		if name == "HEAD" || name == "commondir" {
			return false
		}
		prefix := at(name) + "/"
		for p := range all {
			if strings.HasPrefix(p, prefix) {
				return true
			}
		}
		fi, err := root.Lstat(at(name))
		return err == nil && fi.IsDir()
	}
	return hostwrite.GitDirShape(has) != ""
}

// symlinkOut reports whether a symlink at p with target leads out of the
// workspace (absolute, or climbing above it).
func symlinkOut(p, target string) bool {
	if path.IsAbs(target) || strings.HasPrefix(target, "~") {
		return true
	}
	j := path.Join(path.Dir(p), target)
	return j == ".." || strings.HasPrefix(j, "../")
}

// Patch is the unified diff of one of Changes' files.
func (c *Copy) Patch(ctx context.Context, f checkpoint.FileChange) (string, error) {
	return c.opts.Store.Patch(ctx, f)
}

// Applied is what Apply did.
type Applied struct {
	Files []checkpoint.FileChange
	// Skipped are the paths not applied, with the reason (conflicts,
	// refusals).
	Skipped map[string]string
}

// Apply writes the sandbox's changes ch (as Changes listed them) into the
// workspace, all of them or only paths; conflicts and refused paths are
// skipped. meta names the checkpoint the store records first, so an undo
// can take the apply back.
func (c *Copy) Apply(ctx context.Context, ch Changes, paths []string, meta checkpoint.Meta) (Applied, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.base != c.base {
		return Applied{}, errors.New("the workspace and the sandbox were brought in step since these changes were listed: list them again")
	}
	st := c.opts.Store
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	conflict := map[string]bool{}
	for _, p := range ch.Conflicts {
		conflict[p] = true
	}
	res := Applied{Skipped: map[string]string{}}
	apply := map[string]bool{}
	for _, f := range ch.Files {
		switch {
		case len(want) > 0 && !want[f.Path]:
		case conflict[f.Path]:
			res.Skipped[f.Path] = "changed here too"
		case ch.Refused[f.Path] != "":
			res.Skipped[f.Path] = ch.Refused[f.Path]
		default:
			apply[f.Path] = true
		}
	}
	if len(apply) == 0 {
		return res, nil
	}
	done, err := st.ApplyPaths(ctx, checkpoint.Checkpoint{Tree: ch.copy}, apply, meta)
	if err != nil {
		return res, fmt.Errorf("apply the sandbox's changes: %w", err)
	}
	res.Files = done
	// The applied paths now agree: the base takes the sandbox's version.
	var set []checkpoint.TreeFile
	var remove []string
	for p := range apply {
		if s, ok := ch.files[p]; ok {
			set = append(set, s)
		} else {
			remove = append(remove, p)
		}
	}
	return res, c.editBase(set, remove)
}

// Rebase takes the workspace's present version of paths for the base of
// the copy opts.StateFile keeps (no sandbox is needed): after an undo has
// put them back, what the sandbox has for them is a change to apply
// again, not the workspace's edit to carry in.
func Rebase(ctx context.Context, opts Options, paths []string) error {
	data, err := os.ReadFile(opts.StateFile)
	if err != nil {
		return fmt.Errorf("read the copy's state: %w", err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("read the copy's state: %w", err)
	}
	c := &Copy{opts: opts, base: st.Base}
	return c.Rebase(ctx, paths)
}

// Rebase is the package's Rebase for a copy in use.
func (c *Copy) Rebase(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.opts.Store
	now, err := st.Current(ctx)
	if err != nil {
		return err
	}
	host, err := st.Lookup(ctx, now.Tree, paths)
	if err != nil {
		return err
	}
	var set []checkpoint.TreeFile
	var remove []string
	for _, p := range paths {
		if h, ok := host[p]; ok {
			set = append(set, h)
		} else {
			remove = append(remove, p)
		}
	}
	return c.editBase(set, remove)
}

// Stat is a diff stat line of the changes: "3 files changed: 1 created,
// 1 deleted, 1 modified".
func (ch Changes) Stat() string {
	var created, deleted, modified int
	for _, f := range ch.Files {
		switch f.Action {
		case checkpoint.Created:
			created++
		case checkpoint.Deleted:
			deleted++
		default:
			modified++
		}
	}
	var b bytes.Buffer
	if len(ch.Files) == 1 {
		b.WriteString("1 file changed")
	} else {
		fmt.Fprintf(&b, "%d files changed", len(ch.Files))
	}
	var parts []string
	for _, x := range []struct {
		n    int
		what string
	}{{created, "created"}, {deleted, "deleted"}, {modified, "modified"}} {
		if x.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, ", "))
	}
	return b.String()
}
