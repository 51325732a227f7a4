package docker

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox/gitshadow"
)

func gitHere(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Every protected repository, and every directory on the way to it, is
// fixed in place; a submodule that is not checked out is read-only, and
// one without a directory is named in a notice.
func TestPlanGitFixesTheWayToProtectedRepositories(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and git is missing")
		}
		t.Skip("git not installed")
	}
	t.Parallel()
	lib := t.TempDir()
	gitHere(t, lib, "init", "-q")
	gitHere(t, lib, "commit", "-q", "--allow-empty", "-m", "x")
	ws := t.TempDir()
	gitHere(t, ws, "init", "-q")
	for _, sub := range []string{"a/b/sub", "unchecked", "gone"} {
		gitHere(t, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, sub)
	}
	gitHere(t, ws, "commit", "-q", "-m", "add the submodules")
	gitHere(t, ws, "submodule", "deinit", "-q", "unchecked", "gone")
	os.RemoveAll(filepath.Join(ws, "gone"))
	gitHere(t, ws, "init", "-q", "vendor/clone")

	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sc := gitshadow.NewScanner(ws, root, gitStore)
	defer sc.Close()
	sc.Protect(".git")
	found, err := sc.Scan()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planGit(ws, found, nil)
	if err != nil {
		t.Fatal(err)
	}
	abs := func(rels ...string) []string {
		var out []string
		for _, r := range rels {
			out = append(out, filepath.Join(ws, r))
		}
		return out
	}
	if want := abs("a/b/sub/.git", "unchecked", "vendor/clone/.git"); !slices.Equal(p.ReadOnly, want) {
		t.Errorf("read-only:\n got %q\nwant %q", p.ReadOnly, want)
	}
	if want := abs("a", "a/b", "a/b/sub", "vendor", "vendor/clone"); !slices.Equal(p.Fixed, want) {
		t.Errorf("fixed:\n got %q\nwant %q", p.Fixed, want)
	}
	if n := strings.Join(p.Notices, "\n"); !strings.Contains(n, "the submodule gone has no directory here") {
		t.Errorf("notices: %q", p.Notices)
	}
	if err := p.checkSources(ws); err != nil {
		t.Errorf("check the sources: %v", err)
	}
}
