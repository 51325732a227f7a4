package gitshadow

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Repo is the git repository a workspace belongs to, found on the host the
// way git finds it (the nearest ancestor with a .git), without following a
// symlink and without running git.
type Repo struct {
	// Top is the top directory of the repository's worktree: the workspace
	// or one of its ancestors.
	Top string
	// DotGit is Top/.git.
	DotGit string
	// Gitfile is set when DotGit is a file naming the git directory (a
	// linked worktree, a submodule): it is protected as a file.
	Gitfile bool
	// CommonDir holds the objects, refs and config; it is what the sandbox
	// sees a shadow of.
	CommonDir string
	// Worktree, for a linked worktree, is the worktree's own directory
	// relative to CommonDir ("worktrees/<name>"): its HEAD and index.
	Worktree string
	// Modules lists the submodule git directories under CommonDir
	// ("modules/lib", "modules/lib/modules/x"), each a full repository.
	Modules []string
}

// GitDirs lists the git directories the shadow mirrors, relative to
// CommonDir: "" (the common directory), the linked worktree's, then every
// submodule's.
func (r *Repo) GitDirs() []string {
	out := []string{""}
	if r.Worktree != "" {
		out = append(out, r.Worktree)
	}
	return append(out, r.Modules...)
}

// Discovery errors: a repository shiro will not mirror into the sandbox,
// each with the way out in its message.
var (
	// ErrGitSymlink: the workspace's .git is a symlink.
	ErrGitSymlink = errors.New(".git is a symlink")
	// ErrGitfile: a gitfile that cannot be trusted (points inside the
	// workspace, at no git directory, or at another worktree's).
	ErrGitfile = errors.New("untrusted gitfile")
)

// RepoError says which .git shiro refuses and what to do about it.
type RepoError struct {
	Path   string // the .git
	Reason string
	Err    error
}

func (e *RepoError) Error() string {
	return fmt.Sprintf("%s: %s. shiro will not mirror it into the sandbox, because a process in the sandbox may have made it so; "+
		"fix it on your machine (replace a symlinked .git with the directory it points to, or remove a stray gitfile), or run with --no-sandbox", e.Path, e.Reason)
}

func (e *RepoError) Unwrap() error { return e.Err }

// maxGitfile caps what is read of a gitfile, commondir or gitdir file.
const maxGitfile = 4096

// Discover finds the repository of workspace (an absolute, clean path).
// It returns nil without an error when there is none. A .git that is a
// symlink, or a gitfile that points inside the workspace, at something
// that is not a git directory, or at another worktree's git directory, is
// a *RepoError.
func Discover(workspace string) (*Repo, error) {
	for dir := workspace; ; dir = filepath.Dir(dir) {
		repo, err := repoAt(dir, workspace)
		if err != nil || repo != nil {
			return repo, err
		}
		if filepath.Dir(dir) == dir {
			return nil, nil
		}
	}
}

// repoAt looks at dir/.git as git's discovery does at one level.
func repoAt(dir, workspace string) (*Repo, error) {
	dotGit := filepath.Join(dir, ".git")
	fi, err := os.Lstat(dotGit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("look for a repository at %s: %w", dotGit, err)
	}
	switch mode := fi.Mode(); {
	case mode&fs.ModeSymlink != 0:
		if _, err := os.Stat(dotGit); errors.Is(err, fs.ErrNotExist) {
			// A symlink that leads nowhere here (such as one shiro left to a
			// git item moved where only the sandbox sees it): git passes
			// it by, and so does shiro.
			return nil, nil
		}
		target, _ := os.Readlink(dotGit)
		return nil, &RepoError{Path: dotGit, Reason: fmt.Sprintf("it is a symlink (to %s)", target), Err: ErrGitSymlink}
	case mode.IsDir():
		if !isGitDir(dotGit) {
			return nil, nil // not a repository: git looks further up too
		}
		if _, err := os.Lstat(filepath.Join(dotGit, "commondir")); err == nil {
			return nil, &RepoError{Path: dotGit, Reason: "it is a worktree's git directory (it has a commondir), not a repository", Err: ErrGitfile}
		}
		r := &Repo{Top: dir, DotGit: dotGit, CommonDir: dotGit}
		r.Modules = findModules(dotGit, "")
		return r, nil
	case mode.IsRegular():
		return gitfileRepo(dir, dotGit, workspace)
	}
	return nil, nil
}

// gitfileRepo follows a gitfile (`gitdir: <path>`) to the repository of a
// linked worktree or a submodule.
func gitfileRepo(dir, dotGit, workspace string) (*Repo, error) {
	refuse := func(reason string) (*Repo, error) {
		return nil, &RepoError{Path: dotGit, Reason: reason, Err: ErrGitfile}
	}
	target, err := readPointer(dotGit, "gitdir: ")
	if err != nil {
		return refuse(err.Error())
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target)
	}
	target = filepath.Clean(target)
	if within(target, workspace) {
		return refuse(fmt.Sprintf("it points inside the workspace (%s), where the sandbox can write", target))
	}
	if real, err := filepath.EvalSymlinks(target); err != nil || real != target {
		return refuse(fmt.Sprintf("it points at %s, which is missing or reached through a symlink", target))
	}
	if !isGitDir(target) {
		return refuse(fmt.Sprintf("it points at %s, which is not a git directory", target))
	}
	r := &Repo{Top: dir, DotGit: dotGit, Gitfile: true, CommonDir: target}
	common, err := readPointer(filepath.Join(target, "commondir"), "")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A submodule (or a separate git directory): a full repository
		// whose configured worktree must be this directory.
		wt, ok := configWorktree(target)
		if !ok {
			if !strings.Contains(filepath.ToSlash(target), "/.git/modules/") {
				return refuse(fmt.Sprintf("it points at %s, which names no worktree and is no submodule's git directory", target))
			}
		} else if resolved := filepath.Clean(joinFrom(target, wt)); resolved != dir {
			return refuse(fmt.Sprintf("it points at %s, whose worktree is %s, not this directory", target, resolved))
		}
	case err != nil:
		return refuse(fmt.Sprintf("its git directory %s has an unreadable commondir: %v", target, err))
	default:
		// A linked worktree: the git directory must point back here.
		back, err := readPointer(filepath.Join(target, "gitdir"), "")
		if err != nil || filepath.Clean(joinFrom(target, back)) != dotGit {
			return refuse(fmt.Sprintf("it points at %s, which belongs to another worktree", target))
		}
		commonDir := filepath.Clean(joinFrom(target, common))
		if real, err := filepath.EvalSymlinks(commonDir); err != nil || real != commonDir || !isGitDir(commonDir) {
			return refuse(fmt.Sprintf("its common git directory %s is missing, not a git directory, or reached through a symlink", commonDir))
		}
		if within(commonDir, workspace) {
			return refuse(fmt.Sprintf("its common git directory %s is inside the workspace, where the sandbox can write", commonDir))
		}
		rel, err := filepath.Rel(commonDir, target)
		if err != nil || strings.HasPrefix(rel, "..") || !strings.HasPrefix(filepath.ToSlash(rel), "worktrees/") {
			return refuse(fmt.Sprintf("its git directory %s is not under %s/worktrees", target, commonDir))
		}
		r.CommonDir, r.Worktree = commonDir, filepath.ToSlash(rel)
	}
	r.Modules = findModules(r.CommonDir, "")
	return r, nil
}

// isGitDir is git's test of a git directory: a HEAD, objects and refs
// (here: a regular HEAD and real directories, never symlinks), or a HEAD
// and a commondir.
func isGitDir(dir string) bool {
	if fi, err := os.Lstat(filepath.Join(dir, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if fi, err := os.Lstat(filepath.Join(dir, "commondir")); err == nil && fi.Mode().IsRegular() {
		return true
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := os.Lstat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// findModules lists the submodule git directories under gitDir/modules,
// recursively, relative to the common directory (prefix + "modules/...").
// A submodule's name may contain slashes, so every directory that is a git
// directory counts and is not descended into except for its own modules.
func findModules(gitDir, prefix string) []string {
	var out []string
	var walk func(abs, rel string)
	walk = func(abs, rel string) {
		entries, err := os.ReadDir(abs)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() { // never a symlink: DirEntry types come from lstat
				continue
			}
			sub, subRel := filepath.Join(abs, e.Name()), rel+"/"+e.Name()
			if isGitDir(sub) {
				out = append(out, subRel)
				out = append(out, findModules(sub, subRel+"/")...)
				continue
			}
			walk(sub, subRel)
		}
	}
	walk(filepath.Join(gitDir, "modules"), prefix+"modules")
	return out
}

// readPointer reads a one-line file such as a gitfile ("gitdir: path"), a
// commondir or a gitdir file, refusing a symlink or anything but a small
// regular file.
func readPointer(path, prefix string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxGitfile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxGitfile {
		return "", fmt.Errorf("%s is too large", path)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	s := strings.TrimRight(string(line), "\r")
	if prefix != "" {
		v, ok := strings.CutPrefix(s, prefix)
		if !ok {
			return "", fmt.Errorf("%s does not start with %q", path, prefix)
		}
		s = v
	}
	if s == "" || strings.ContainsRune(s, 0) {
		return "", fmt.Errorf("%s names no path", path)
	}
	return s, nil
}

// configWorktree returns core.worktree from gitDir/config, if set.
func configWorktree(gitDir string) (string, bool) {
	f, err := os.OpenFile(filepath.Join(gitDir, "config"), os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	section := ""
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = strings.ToLower(strings.Trim(strings.Fields(strings.Trim(line, "[]") + " ")[0], " "))
			continue
		}
		if section != "core" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "worktree") {
			return strings.Trim(strings.TrimSpace(v), `"`), true
		}
	}
	return "", false
}

// joinFrom resolves p relative to dir unless it is absolute.
func joinFrom(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
