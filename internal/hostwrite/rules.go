// Package hostwrite is the one gate for everything shiro itself writes
// into a workspace on the host on the model's or the sandbox's behalf: the
// file tools, undo, copy mode's apply and its undo, the probe of shiro
// doctor; and it has the primitive the git boundary's replacements need
// (ReplaceWithSymlink).
//
// A Gate holds one open descriptor of the workspace directory. Every path
// is walked from it one component at a time, each opened with
// O_NOFOLLOW|O_DIRECTORY, and every operation is a *at system call on a
// single name relative to the directory descriptor the walk ended on: a
// symlink in any component is refused rather than followed, and a rename
// between the check and the write cannot redirect it.
//
// A write is refused (a *Refusal that says what and why, with nothing
// written or removed) when its path
//
//   - goes through a symlink,
//   - is inside a git directory the gate protects, known by identity
//     (device and inode): the workspace's own git directory and, for a
//     linked worktree or a gitfile, the repository's common directory,
//     found when the gate is made, and whatever Protect adds,
//   - has a component or a final name that git takes for ".git" (IsDotGit),
//   - is inside a directory that is a git directory by its shape (a HEAD
//     beside objects and refs, or beside commondir: GitDirShape), or
//   - would give its directory that shape.
//
// Otherwise writes behave as shiro's always did: atomic (a temporary file
// in the same directory, synced, renamed over the old one, the directory
// synced), an existing file keeping its permission bits, a new one 0644
// less the umask, missing parent directories made (also without following
// symlinks).
package hostwrite

import (
	"fmt"
	"github.com/shiroagent/shiro/internal/termsafe"
	"strings"
	"unicode/utf8"
)

// Refusal is a write the gate refused. Nothing was written or removed for
// it.
type Refusal struct {
	// Path is the workspace-relative path of the write.
	Path string
	// Reason says why, in a sentence the user and the model can read:
	// "d is a symlink; shiro writes only through real directories".
	Reason string
}

// Error quotes the path when it holds what a terminal would not show as
// it is (the workspace chose it); the reason quotes its names likewise.
func (r *Refusal) Error() string { return termsafe.Name(r.Path) + ": " + r.Reason }

// The reasons' common endings.
const (
	noGitMetadata  = "shiro never writes git metadata on your machine"
	onlyRealDirs   = "shiro writes only through real directories"
	outsideReason  = "it is outside the workspace"
	repositoryDesc = "the repository's git directory"
	worktreeDesc   = "the worktree's git directory"
	protectedDesc  = "a repository's git directory"
)

func refuse(p, format string, args ...any) *Refusal {
	return &Refusal{Path: p, Reason: fmt.Sprintf(format, args...)}
}

func symlinkRefusal(p, comp string) *Refusal {
	return refuse(p, "%s is a symlink; %s", termsafe.Name(comp), onlyRealDirs)
}

// dotGitRefusal refuses p for its directory comp, named as .git.
func dotGitRefusal(p, comp string) *Refusal {
	return refuse(p, "it is inside a .git directory (%s); %s", termsafe.Name(comp), noGitMetadata)
}

// dotGitEntry refuses p for its own name.
func dotGitEntry(p string) *Refusal {
	return refuse(p, "git takes an entry of that name for a repository; %s", noGitMetadata)
}

// protectedRefusal refuses p for its directory comp, protected as desc.
func protectedRefusal(p, comp, desc string) *Refusal {
	if comp == ".git" {
		return refuse(p, "it is inside %s; %s", desc, noGitMetadata)
	}
	return refuse(p, "it is inside %s (%s); %s", desc, termsafe.Name(comp), noGitMetadata)
}

// protectedEntry refuses p, itself protected as desc.
func protectedEntry(p, desc string) *Refusal {
	return refuse(p, "it is %s; %s", desc, noGitMetadata)
}

func shapeRefusal(p, dir, shape string) *Refusal {
	return refuse(p, "it is inside %s, a git directory (%s); %s", displayDir(dir), shape, noGitMetadata)
}

func makesRefusal(p, dir string) *Refusal {
	return refuse(p, "it would make %s a git directory; %s", displayDir(dir), noGitMetadata)
}

func displayDir(d string) string {
	if d == "." || d == "" {
		return "the workspace"
	}
	return termsafe.Name(d)
}

// IsDotGit reports whether git takes the path component c for ".git" on
// some file system: any case, trailing dots or spaces and an NTFS stream
// suffix (".git.", ".GIT ", ".git::$INDEX_ALLOCATION"), the 8.3 short
// names ("git~1" to "git~4", "gi7eba~N"), and the code points HFS+
// ignores (".g\u200cit").
func IsDotGit(c string) bool {
	if !utf8.ValidString(c) {
		return false
	}
	var b strings.Builder
	for _, r := range c {
		if hfsIgnorable(r) {
			continue
		}
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	t := b.String()
	if i := strings.IndexByte(t, ':'); i >= 0 {
		t = t[:i] // an NTFS stream of the entry is the entry
	}
	t = strings.TrimRight(t, ". ")
	if t == ".git" {
		return true
	}
	for _, short := range []string{"git~", "gi7eba~"} {
		if n, ok := strings.CutPrefix(t, short); ok && len(n) == 1 && '0' <= n[0] && n[0] <= '9' {
			return short == "gi7eba~" || ('1' <= n[0] && n[0] <= '4')
		}
	}
	return false
}

// hfsIgnorable are the code points HFS+ leaves out of a name when it
// compares names (as git's is_hfs_dotgit lists them).
func hfsIgnorable(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}

// The names that make a directory a git directory together.
var shapeNames = []string{"HEAD", "objects", "refs", "commondir"}

// shapeName reports whether name is one of shapeNames, in any case (a
// case-insensitive file system takes "head" for HEAD), and which.
func shapeName(name string) (string, bool) {
	for _, n := range shapeNames {
		if strings.EqualFold(name, n) {
			return n, true
		}
	}
	return "", false
}

// GitDirShape reports whether a directory holding the entries has says it
// holds is what git takes for a git directory: a HEAD beside objects and
// refs, or beside a commondir. It returns the shape found ("HEAD beside
// objects and refs") or "". has is asked only for the names HEAD,
// objects, refs and commondir.
func GitDirShape(has func(name string) bool) string {
	if !has("HEAD") {
		return ""
	}
	if has("commondir") {
		return "HEAD beside commondir"
	}
	if has("objects") && has("refs") {
		return "HEAD beside objects and refs"
	}
	return ""
}
