package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/moby/api/types/mount"

	"github.com/shiroagent/shiro/sandbox/gitshadow"
	"github.com/shiroagent/shiro/sandbox/owner"
)

// Paths inside the container. /.shiro and /.shiro/bin belong to root: the
// command user can neither replace the helper nor add to them.
const (
	helperDir = "/.shiro"
	homeDir   = "/home/shiro"
	// stateDir is a per-workspace volume the command user owns: the
	// helper's last-used mark and the git items moved out of the
	// workspace (stateDir/git/<id>).
	containerStateDir = helperDir + "/state"
	// gitStore is where a HEAD, gitfile or .git symlink found in the
	// workspace is moved; a symlink to it is dangling on the host.
	gitStore = containerStateDir + "/git"
	// hostGitMount is the host's git directory, read-only: the shadow's
	// alternates point into it.
	hostGitMount = helperDir + "/host"
	// shadowSetupMount is the shadow volume's second mount point, in the
	// container's own filesystem, where its ownership can be set.
	shadowSetupMount = helperDir + "/shadow"
)

// workspaceID names a workspace directory as an object, not only a path
// (owner.WorkspaceID): a repository removed and made again at the same
// path gets a fresh HOME.
func workspaceID(ws string) (string, error) { return owner.WorkspaceID(ws) }

// workspaceVolumeKey keys the volumes of one workspace directory.
func workspaceVolumeKey(ws, id string) string { return owner.WorkspaceVolumeKey(ws, id) }

// gitPlan is what the workspace's repositories need from the container.
type gitPlan struct {
	// Repo is the workspace's repository (nil when there is none, or when
	// its worktree holds the user's home and is not mounted).
	Repo *gitshadow.Repo
	// MountTop is set when the repository's worktree starts above the
	// workspace: it is mounted read-only.
	MountTop bool
	// ReadOnly lists paths in the workspace that are mounted read-only
	// over themselves: the repository's gitfile, submodule gitfiles, the
	// git directories of repositories the user keeps inside the workspace,
	// and the directories of submodules that are not checked out.
	ReadOnly []string
	// Fixed lists directories in the workspace mounted read-write over
	// themselves, so that they can be neither renamed nor removed: every
	// directory on the way from the workspace to a ReadOnly path. A
	// renamed parent takes its mounts along, and what the sandbox made in
	// its place would not be protected.
	Fixed []string
	// Notices explain what was left out.
	Notices []string
}

// mounts lists the container's mounts for a workspace and its plan.
func (p gitPlan) mounts(ws, homeVol, stateVol, shadowVol string, labels func(vol string) map[string]string) []mount.Mount {
	vol := func(name, target string) mount.Mount {
		return mount.Mount{Type: mount.TypeVolume, Source: name, Target: target,
			VolumeOptions: &mount.VolumeOptions{Labels: labels(name)}}
	}
	out := []mount.Mount{
		{Type: mount.TypeBind, Source: ws, Target: ws},
		vol(homeVol, homeDir),
		vol(stateVol, containerStateDir),
	}
	if p.Repo != nil {
		if p.MountTop {
			out = append(out, mount.Mount{Type: mount.TypeBind, Source: p.Repo.Top, Target: p.Repo.Top, ReadOnly: true})
		}
		out = append(out,
			vol(shadowVol, p.Repo.CommonDir),
			vol(shadowVol, shadowSetupMount),
			mount.Mount{Type: mount.TypeBind, Source: p.Repo.CommonDir, Target: hostGitMount, ReadOnly: true},
		)
	}
	for _, d := range p.Fixed {
		out = append(out, mount.Mount{Type: mount.TypeBind, Source: d, Target: d})
	}
	for _, ro := range p.ReadOnly {
		out = append(out, mount.Mount{Type: mount.TypeBind, Source: ro, Target: ro, ReadOnly: true})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// planGit finds the workspace's repository and the repositories the user
// keeps inside it. found are the scanner's findings when the session opens
// (relative to ws); the ones the user made are protected by read-only
// mounts, the rest (sandbox-made, returned) are moved out of reach.
// noMount lists directories that must never be mounted into the sandbox
// (the user's home, shiro's own configuration): a repository whose
// worktree contains one is not mounted.
func planGit(ws string, found []gitshadow.Finding, noMount []string) (gitPlan, error) {
	var p gitPlan
	repo, err := gitshadow.Discover(ws)
	if err != nil {
		return p, err
	}
	if repo != nil && repo.Top != ws {
		for _, n := range noMount {
			if n != "" && (n == repo.Top || strings.HasPrefix(n+"/", repo.Top+"/")) {
				p.Notices = append(p.Notices, fmt.Sprintf("the workspace is inside the git repository at %s, which holds %s; shiro does not mount it into the sandbox, so git in the sandbox sees no repository here", repo.Top, n))
				repo = nil
				break
			}
		}
	}
	p.Repo = repo
	if repo != nil {
		p.MountTop = repo.Top != ws
		if repo.Gitfile && repo.Top == ws {
			p.ReadOnly = append(p.ReadOnly, repo.DotGit)
		}
	}
	for _, f := range found {
		abs := filepath.Join(ws, filepath.FromSlash(f.Path))
		switch f.Kind {
		case gitshadow.KindHEAD: // a git directory: protect it whole
			dir := filepath.Dir(abs)
			if repo != nil && dir == repo.CommonDir {
				continue
			}
			p.ReadOnly = append(p.ReadOnly, dir)
		case gitshadow.KindGitfile:
			if repo != nil && abs == repo.DotGit {
				continue
			}
			p.ReadOnly = append(p.ReadOnly, abs)
		}
	}
	p.ReadOnly = append(p.ReadOnly, uncheckedSubmodules(ws, repo, &p)...)
	sort.Strings(p.ReadOnly)
	p.Fixed = fixedDirs(ws, p.ReadOnly)
	return p, nil
}

// uncheckedSubmodules lists the directories of the workspace repository's
// submodules that are not checked out (a gitlink in the index, no .git at
// its path): git on the host goes into a submodule's directory as soon as
// it holds a repository, so the sandbox must not be able to make one
// there. One whose directory is missing cannot be mounted: a notice says
// so, and the scan moves what the sandbox makes there.
func uncheckedSubmodules(ws string, repo *gitshadow.Repo, p *gitPlan) []string {
	if repo == nil {
		return nil
	}
	paths, err := gitshadow.IndexGitlinks(repo)
	if err != nil {
		p.Notices = append(p.Notices, fmt.Sprintf("the repository's index could not be read for its submodules: %v", err))
		return nil
	}
	var out []string
	for _, rel := range paths {
		abs := filepath.Join(repo.Top, filepath.FromSlash(rel))
		if !strings.HasPrefix(abs, ws+string(filepath.Separator)) {
			continue // outside the workspace: read-only in the sandbox
		}
		if _, err := os.Lstat(filepath.Join(abs, ".git")); err == nil {
			continue // checked out: its gitfile is protected
		}
		if realDir(ws, abs) {
			out = append(out, abs)
			continue
		}
		p.Notices = append(p.Notices, fmt.Sprintf("the submodule %s has no directory here, so shiro cannot keep the sandbox from making a repository there; git on your machine would go into one until the next scan moves it (check the submodule out, or remove it)", rel))
	}
	return out
}

// realDir reports whether abs is a directory reached from ws through
// directories only (no symlink on the way).
func realDir(ws, abs string) bool {
	rel, err := filepath.Rel(ws, abs)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	dir := ws
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		dir = filepath.Join(dir, c)
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// fixedDirs lists every directory strictly between ws and each of paths,
// sorted, without the paths themselves.
func fixedDirs(ws string, paths []string) []string {
	self := map[string]bool{}
	for _, p := range paths {
		self[p] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		for d := filepath.Dir(p); strings.HasPrefix(d, ws+string(filepath.Separator)); d = filepath.Dir(d) {
			if seen[d] || self[d] {
				continue
			}
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// checkSources makes sure every path the plan mounts from inside the
// workspace is reached through directories only, as when it was planned:
// the engine would follow a symlink put on the way, and mount whatever it
// points at.
func (p gitPlan) checkSources(ws string) error {
	for _, list := range [][]string{p.Fixed, p.ReadOnly} {
		for _, abs := range list {
			rel, err := filepath.Rel(ws, abs)
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			if !realDir(ws, filepath.Dir(abs)) && filepath.Dir(abs) != ws {
				return fmt.Errorf("%s is no longer reached through directories only; shiro will not mount it", abs)
			}
			fi, err := os.Lstat(abs)
			if err != nil {
				return fmt.Errorf("%s, which the sandbox's mounts protect, is gone: %w", abs, err)
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				return fmt.Errorf("%s, which the sandbox's mounts protect, is a symlink now; shiro will not mount it", abs)
			}
		}
	}
	return nil
}
