package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox"
)

// world is a repository with one commit on main, and the layout of its
// agents under a data directory of the test's.
type world struct {
	t      *testing.T
	repo   Repository
	layout Layout
}

func newWorld(t *testing.T) *world {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("these tests run real git:", err)
	}
	base := t.TempDir()
	top := filepath.Join(base, "checkout")
	w := &world{t: t}
	w.git(base, "init", "-q", "-b", "main", top)
	w.git(top, "config", "user.name", "u")
	w.git(top, "config", "user.email", "u@host")
	w.git(top, "config", "commit.gpgSign", "false")
	w.write(top, "a.txt", "one\ntwo\nthree\n")
	w.commit(top, "first", "a.txt")
	repo, err := FindRepository(top)
	if err != nil {
		t.Fatal(err)
	}
	w.repo = repo
	w.layout = LayoutFor(filepath.Join(base, "data"), "", repo.CommonDir)
	return w
}

func (w *world) git(dir string, args ...string) string {
	w.t.Helper()
	out, err := Git(w.t.Context(), dir, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

func (w *world) write(dir, name, content string) {
	w.t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) commit(dir, msg string, files ...string) string {
	w.t.Helper()
	w.git(dir, append([]string{"add", "--"}, files...)...)
	w.git(dir, "commit", "-q", "-m", msg)
	return w.git(dir, "rev-parse", "HEAD")
}

// agent makes the agent name as shiro would: a worktree of HEAD on
// shiro/NAME in the layout, and its record.
func (w *world) agent(name string) *Agent {
	w.t.Helper()
	head := w.git(w.repo.Top, "rev-parse", "HEAD")
	a := &Agent{Name: name, Branch: Branch(name), Path: w.layout.Path(name), Checkout: w.repo.Top, CommonDir: w.repo.CommonDir, Base: head, Created: time.Now().UTC()}
	if err := os.MkdirAll(w.layout.Root, 0o755); err != nil {
		w.t.Fatal(err)
	}
	w.git(w.repo.Top, "worktree", "add", "-q", "-b", a.Branch, a.Path, head)
	if err := w.layout.Save(a); err != nil {
		w.t.Fatal(err)
	}
	return a
}

// state is what "the checkout as it was" means: HEAD, ORIG_HEAD, the
// index's entries, the working files with their times, git status and
// merge state.
func (w *world) state() string { return w.stateWith(true) }

// stateWith is state, the files' times left out unless times.
func (w *world) stateWith(times bool) string {
	w.t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"rev-parse", "HEAD"}, {"rev-parse", "--symbolic-full-name", "HEAD"},
		{"rev-parse", "--quiet", "--verify", "ORIG_HEAD"},
		{"ls-files", "--stage"}, {"status", "--porcelain", "--untracked-files=all"},
	} {
		out, _ := Git(w.t.Context(), w.repo.Top, args...)
		b.WriteString(out + "\n")
	}
	entries, _ := os.ReadDir(w.repo.Top)
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		p := filepath.Join(w.repo.Top, e.Name())
		data, _ := os.ReadFile(p)
		fi, _ := os.Lstat(p)
		fmt.Fprintf(&b, "%s %s: %s\n", e.Name(), fi.Mode(), data)
		if times {
			fmt.Fprintf(&b, "%s %d\n", e.Name(), fi.ModTime().UnixNano())
		}
	}
	for _, f := range []string{"MERGE_HEAD", "MERGE_MSG"} {
		if _, err := os.Stat(filepath.Join(w.repo.CommonDir, f)); err == nil {
			b.WriteString(f + "\n")
		}
	}
	return b.String()
}

// fakeSandboxes is a Sandboxes with one container per workspace it is
// given.
type fakeSandboxes struct {
	containers map[string]string
	removed    []string
}

func (f *fakeSandboxes) List(_ context.Context, ws string) ([]sandbox.Entry, error) {
	if c, ok := f.containers[ws]; ok {
		return []sandbox.Entry{{Backend: "docker", Workspace: ws, Name: c, State: "exited"}}, nil
	}
	return nil, nil
}

func (f *fakeSandboxes) Remove(_ context.Context, ws string, report func(sandbox.Item)) error {
	if c, ok := f.containers[ws]; ok {
		report(sandbox.Item{Kind: "container", Name: c, Workspace: ws})
		delete(f.containers, ws)
		f.removed = append(f.removed, ws)
	}
	return nil
}

func TestStatuses(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	busy := w.agent("busy")
	idle := w.agent("idle")
	w.write(busy.Path, "a.txt", "one\nTWO\nthree\n")
	w.write(busy.Path, "new/b.txt", "b\n")
	w.commit(busy.Path, "busy's change", "a.txt", "new/b.txt")
	w.write(busy.Path, "scratch.txt", "not committed\n")
	w.write(busy.Path, "a.txt", "one\nTWO\nthree\nfour\n")

	release, err := w.layout.Hold("busy")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sessions := &store.Store{Dir: filepath.Join(t.TempDir(), "sessions")}
	active := time.Now().Add(time.Hour).UTC().Round(time.Second)
	rec := store.NewRecord(filepath.Join(busy.Path, "sub"), "anthropic", "m")
	if err := sessions.Save(&rec); err != nil {
		t.Fatal(err)
	}
	// Save stamps UpdatedAt; set it later than now for the check.
	rec.UpdatedAt = active
	if err := sessions.Save(&rec); err != nil {
		t.Fatal(err)
	}
	got, _ := sessions.Load(rec.ID)
	active = got.UpdatedAt

	sbs := &fakeSandboxes{containers: map[string]string{busy.Path: "shiro-busy"}}
	list, err := w.layout.Statuses(t.Context(), StatusOptions{Sessions: sessions, Sandboxes: sbs})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "busy" || list[1].Name != "idle" {
		t.Fatalf("statuses: %+v", list)
	}
	b, i := list[0], list[1]
	t.Run("a running agent with commits and changes", func(t *testing.T) {
		if !b.Running || b.Commits != 1 || b.Tip != w.git(w.repo.Top, "rev-parse", busy.Branch) {
			t.Errorf("running %v, commits %d, tip %s", b.Running, b.Commits, b.Tip)
		}
		if want := []string{"a.txt", "new/b.txt"}; !slices.Equal(b.Committed, want) {
			t.Errorf("committed %q, want %q", b.Committed, want)
		}
		if want := []string{"a.txt", "scratch.txt"}; !slices.Equal(b.Uncommitted, want) {
			t.Errorf("uncommitted %q, want %q", b.Uncommitted, want)
		}
		if want := []string{"a.txt", "new/b.txt", "scratch.txt"}; !slices.Equal(b.Changed(), want) {
			t.Errorf("changed %q, want %q", b.Changed(), want)
		}
		if !b.LastActivity.Equal(active) {
			t.Errorf("last activity %s, want the session's %s", b.LastActivity, active)
		}
		if len(b.Sandboxes) != 1 || b.Sandboxes[0].Name != "shiro-busy" {
			t.Errorf("sandboxes %+v", b.Sandboxes)
		}
		if len(b.Problems) != 0 {
			t.Errorf("problems: %q", b.Problems)
		}
	})
	t.Run("an ended agent with nothing done", func(t *testing.T) {
		if i.Running || i.Commits != 0 || len(i.Changed()) != 0 || len(i.Sandboxes) != 0 || len(i.Problems) != 0 {
			t.Errorf("%+v", i)
		}
		if !i.LastActivity.Equal(idle.Created) {
			t.Errorf("last activity %s, want the creation %s", i.LastActivity, idle.Created)
		}
	})
	t.Run("a worktree and branch removed behind shiro's back", func(t *testing.T) {
		w.git(w.repo.Top, "worktree", "remove", "--force", idle.Path)
		w.git(w.repo.Top, "branch", "-D", idle.Branch)
		list, err := w.layout.Statuses(t.Context(), StatusOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(list[1].Problems, "; "); !strings.Contains(p, "branch shiro/idle of worktree agent idle is gone") || !strings.Contains(p, "no longer a worktree") {
			t.Errorf("problems: %q", p)
		}
	})
}

// TestGitInTheWorktreeIgnoresItsGitfile: a gitfile the sandbox replaced
// (pointing at a repository whose config defines a filter, and
// .gitattributes naming it) is not followed: git on the host uses the
// worktree's git directory as the repository records it.
func TestGitInTheWorktreeIgnoresItsGitfile(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.agent("x")
	marker := filepath.Join(t.TempDir(), "ran")
	// A repository of the sandbox's making whose work tree is the agent's,
	// with a filter in its config, named by .gitattributes.
	evil := filepath.Join(a.Path, "evil")
	w.git(a.Path, "init", "-q", evil)
	w.git(evil, "config", "filter.evil.clean", "touch "+marker+"; cat")
	w.git(evil, "config", "core.worktree", a.Path)
	w.write(a.Path, ".gitattributes", "* filter=evil\n")
	w.git(a.Path, "--git-dir="+filepath.Join(evil, ".git"), "add", "a.txt")
	w.git(a.Path, "--git-dir="+filepath.Join(evil, ".git"), "-c", "user.name=e", "-c", "user.email=e@e", "commit", "-q", "-m", "evil")
	os.Remove(marker)
	w.write(a.Path, "new.txt", "new\n")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(a.Path, "a.txt"), later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.Path, ".git"), []byte("gitdir: "+filepath.Join(evil, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Git that follows the gitfile runs the filter (else the test proves
	// nothing).
	probe := exec.CommandContext(t.Context(), "git", "-C", a.Path, "diff", "--name-only", "HEAD")
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the planted filter did not run under a plain git diff: %v", err)
	}
	os.Remove(marker)
	list, err := w.layout.Statuses(t.Context(), StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the listing ran a filter the sandbox's gitfile led to")
	}
	if !slices.Contains(list[0].Uncommitted, "new.txt") {
		t.Errorf("uncommitted %q: the worktree's own repository was not read", list[0].Uncommitted)
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.agent("d")
	w.write(a.Path, "a.txt", "one\nTWO\nthree\n")
	w.commit(a.Path, "change", "a.txt")
	w.write(a.Path, "loose.txt", "x\n")
	// The checkout moving on does not show in the agent's diff.
	w.write(w.repo.Top, "main.txt", "main\n")
	w.commit(w.repo.Top, "main moves", "main.txt")

	diff, loose, err := Diff(t.Context(), a, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diff, "-two\n+TWO") || strings.Contains(diff, "main.txt") {
		t.Errorf("diff:\n%s", diff)
	}
	if !slices.Equal(loose, []string{"loose.txt"}) {
		t.Errorf("not committed: %q", loose)
	}
	stat, _, err := Diff(t.Context(), a, true)
	if err != nil || !strings.HasPrefix(stat, " a.txt | 2 +-\n") {
		t.Errorf("stat %q, %v", stat, err)
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()

	t.Run("a fast-forward", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		a := w.agent("ff")
		w.write(a.Path, "a.txt", "one\nTWO\nthree\n")
		tip := w.commit(a.Path, "change", "a.txt")
		res, err := w.layout.Merge(t.Context(), w.repo, "ff")
		if err != nil {
			t.Fatal(err)
		}
		if !res.FastForward || res.Head != tip || w.git(w.repo.Top, "rev-parse", "HEAD") != tip {
			t.Errorf("%+v, want a fast-forward to %s", res, tip)
		}
		if b, _ := os.ReadFile(filepath.Join(w.repo.Top, "a.txt")); string(b) != "one\nTWO\nthree\n" {
			t.Errorf("the checkout's a.txt: %q", b)
		}
		if w.git(w.repo.Top, "status", "--porcelain") != "" {
			t.Error("the checkout is not clean after the merge")
		}
		again, err := w.layout.Merge(t.Context(), w.repo, "ff")
		if err != nil || !again.UpToDate {
			t.Errorf("a second merge: %+v, %v", again, err)
		}
	})

	t.Run("a merge commit when the checkout moved on", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		a := w.agent("mc")
		w.write(a.Path, "a.txt", "one\nTWO\nthree\n")
		tip := w.commit(a.Path, "change", "a.txt")
		w.write(a.Path, "loose.txt", "x\n")
		w.write(w.repo.Top, "main.txt", "main\n")
		head := w.commit(w.repo.Top, "main moves", "main.txt")
		res, err := w.layout.Merge(t.Context(), w.repo, "mc")
		if err != nil {
			t.Fatal(err)
		}
		if res.FastForward || !slices.Equal(res.Uncommitted, []string{"loose.txt"}) {
			t.Errorf("%+v", res)
		}
		if parents := w.git(w.repo.Top, "log", "-1", "--format=%P"); parents != head+" "+tip {
			t.Errorf("the merge's parents %q, want %s %s", parents, head, tip)
		}
		if msg := w.git(w.repo.Top, "log", "-1", "--format=%s"); msg != "Merge branch 'shiro/mc' into main" {
			t.Errorf("message %q", msg)
		}
		if b, _ := os.ReadFile(filepath.Join(w.repo.Top, "a.txt")); string(b) != "one\nTWO\nthree\n" {
			t.Errorf("the checkout's a.txt: %q", b)
		}
	})

	t.Run("a conflict is aborted and leaves the checkout as it was", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		a := w.agent("c")
		w.write(a.Path, "a.txt", "one\nAGENT\nthree\n")
		w.commit(a.Path, "agent", "a.txt")
		w.write(w.repo.Top, "a.txt", "one\nUSER\nthree\n")
		w.commit(w.repo.Top, "user", "a.txt")
		w.write(w.repo.Top, "untracked.txt", "mine\n")
		before := w.state()
		_, err := w.layout.Merge(t.Context(), w.repo, "c")
		var ce *ConflictError
		if !errors.As(err, &ce) || !slices.Equal(ce.Paths, []string{"a.txt"}) {
			t.Fatalf("err %v, want a conflict in a.txt", err)
		}
		if !strings.Contains(err.Error(), "nothing was merged and your checkout is as it was") {
			t.Errorf("message: %v", err)
		}
		if after := w.state(); after != before {
			t.Errorf("the checkout changed:\nbefore %q\nafter  %q", before, after)
		}
	})

	t.Run("a conflict the merge itself meets is aborted", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		a := w.agent("late")
		w.write(a.Path, "a.txt", "one\nAGENT\nthree\n")
		tip := w.commit(a.Path, "agent", "a.txt")
		w.write(w.repo.Top, "a.txt", "one\nUSER\nthree\n")
		head := w.commit(w.repo.Top, "user", "a.txt")
		before := w.stateWith(false)
		// What git without merge-tree --write-tree leaves: the merge in
		// progress, a.txt with markers.
		_, mergeErr := Git(t.Context(), w.repo.Top, "merge", "--no-edit", tip)
		if mergeErr == nil {
			t.Fatal("the merge did not conflict")
		}
		err := undoMerge(t.Context(), w.repo, a, head, "", mergeErr)
		var ce *ConflictError
		if !errors.As(err, &ce) || !slices.Equal(ce.Paths, []string{"a.txt"}) {
			t.Fatalf("err %v, want a conflict in a.txt", err)
		}
		if after := w.stateWith(false); after != before {
			t.Errorf("the checkout changed:\nbefore %q\nafter  %q", before, after)
		}
	})

	t.Run("an untracked file the merge would overwrite stops it", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		a := w.agent("u")
		w.write(a.Path, "new.txt", "the agent's\n")
		w.commit(a.Path, "agent adds new.txt", "new.txt")
		w.write(w.repo.Top, "new.txt", "the user's, not committed\n")
		before := w.state()
		_, err := w.layout.Merge(t.Context(), w.repo, "u")
		if err == nil || !strings.Contains(err.Error(), "would be overwritten") {
			t.Errorf("err %v", err)
		}
		if after := w.state(); after != before {
			t.Errorf("the checkout changed:\nbefore %q\nafter  %q", before, after)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		a := w.agent("r")
		w.write(a.Path, "a.txt", "one\nTWO\nthree\n")
		w.commit(a.Path, "change", "a.txt")
		for _, c := range []struct {
			name  string
			setup func() func()
			want  string
		}{
			{"a checkout with changes", func() func() {
				w.write(w.repo.Top, "a.txt", "dirty\n")
				return func() { w.git(w.repo.Top, "checkout", "--", "a.txt") }
			}, "has changes that are not committed"},
			{"a checkout with staged changes", func() func() {
				w.write(w.repo.Top, "new.txt", "staged\n")
				w.git(w.repo.Top, "add", "new.txt")
				return func() {
					w.git(w.repo.Top, "rm", "-q", "--cached", "new.txt")
					os.Remove(filepath.Join(w.repo.Top, "new.txt"))
				}
			}, "has changes that are not committed"},
			{"a running agent", func() func() {
				release, err := w.layout.Hold("r")
				if err != nil {
					t.Fatal(err)
				}
				return release
			}, "is running in another shiro"},
			{"a detached HEAD", func() func() {
				w.git(w.repo.Top, "checkout", "-q", "--detach")
				return func() { w.git(w.repo.Top, "checkout", "-q", "main") }
			}, "HEAD is detached"},
			{"a checkout in the middle of a merge", func() func() {
				w.git(w.repo.Top, "checkout", "-q", "-b", "side")
				w.write(w.repo.Top, "side.txt", "side\n")
				w.commit(w.repo.Top, "side", "side.txt")
				w.git(w.repo.Top, "checkout", "-q", "main")
				w.git(w.repo.Top, "merge", "-q", "--no-ff", "--no-commit", "side")
				return func() { w.git(w.repo.Top, "merge", "--abort") }
			}, "in the middle of a merge"},
			{"an agent's worktree as the checkout", func() func() {
				return func() {}
			}, "worktree agent's checkout"},
		} {
			undo := c.setup()
			repo := w.repo
			if c.name == "an agent's worktree as the checkout" {
				other := w.agent("other")
				repo.Top = other.Path
			}
			before := w.state()
			_, err := w.layout.Merge(t.Context(), repo, "r")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.want)
			}
			if after := w.state(); after != before {
				t.Errorf("%s: the checkout changed", c.name)
			}
			undo()
		}
		if _, err := w.layout.Merge(t.Context(), w.repo, "nobody"); !errors.Is(err, ErrNoAgent) {
			t.Errorf("an unknown agent: %v", err)
		}
	})
}

func TestRemove(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	keep := w.agent("keep")
	w.write(keep.Path, "a.txt", "kept\n")
	kept := w.commit(keep.Path, "kept", "a.txt")
	gone := w.agent("gone")
	dirty := w.agent("dirty")
	w.write(dirty.Path, "loose.txt", "x\n")
	sbs := &fakeSandboxes{containers: map[string]string{keep.Path: "c-keep", gone.Path: "c-gone", dirty.Path: "c-dirty"}}
	var said []string
	opts := RemoveOptions{Sandboxes: sbs, Report: func(s string) { said = append(said, s) }}

	if err := w.layout.Remove(t.Context(), "keep", opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(keep.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worktree is still there: %v", err)
	}
	if strings.Contains(w.git(w.repo.Top, "worktree", "list", "--porcelain"), keep.Path) {
		t.Error("git still lists the worktree")
	}
	if got := w.git(w.repo.Top, "rev-parse", keep.Branch); got != kept {
		t.Errorf("the branch is not kept: %s", got)
	}
	if _, err := w.layout.Load("keep"); !errors.Is(err, ErrNoAgent) {
		t.Errorf("the record is still there: %v", err)
	}
	if !slices.Equal(sbs.removed, []string{keep.Path}) || !slices.Contains(said, "removing container c-keep") {
		t.Errorf("sandboxes removed %q, said %q", sbs.removed, said)
	}

	release, err := w.layout.Hold("gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.layout.Remove(t.Context(), "gone", opts); err == nil || !strings.Contains(err.Error(), "is running") {
		t.Errorf("a running agent: %v", err)
	}
	release()
	opts.DeleteBranch = true
	if err := w.layout.Remove(t.Context(), "gone", opts); err != nil {
		t.Fatal(err)
	}
	if _, err := Git(t.Context(), w.repo.Top, "rev-parse", "--verify", gone.Branch); err == nil {
		t.Error("--delete-branch left the branch")
	}

	if err := w.layout.Remove(t.Context(), "dirty", opts); !errors.Is(err, ErrUncommitted) || !strings.Contains(err.Error(), "loose.txt") {
		t.Errorf("a worktree with changes: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dirty.Path, "loose.txt")); err != nil {
		t.Errorf("the refused remove touched the worktree: %v", err)
	}
	opts.Force = true
	if err := w.layout.Remove(t.Context(), "dirty", opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dirty.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--force left the worktree: %v", err)
	}
	if out, err := Git(t.Context(), w.repo.Top, "fsck", "--no-progress"); err != nil {
		t.Errorf("git fsck: %v %s", err, out)
	}
}

func TestRemoveRefusesARecordThatNamesAnotherDirectory(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.agent("x")
	a.Path = w.repo.Top
	if err := w.layout.Save(a); err != nil {
		t.Fatal(err)
	}
	err := w.layout.Remove(t.Context(), "x", RemoveOptions{Force: true})
	if err == nil || !strings.Contains(err.Error(), "not an agent's worktree") {
		t.Errorf("err %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.repo.Top, "a.txt")); err != nil {
		t.Errorf("the checkout was touched: %v", err)
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	old := w.agent("old")
	w.agent("recent")
	busy := w.agent("busy")
	loose := w.agent("loose")
	w.write(loose.Path, "x.txt", "x\n")
	for _, a := range []*Agent{old, busy, loose} {
		a.Created = time.Now().Add(-10 * 24 * time.Hour)
		if err := w.layout.Save(a); err != nil {
			t.Fatal(err)
		}
	}
	release, err := w.layout.Hold("busy")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	opts := PruneOptions{OlderThan: 7 * 24 * time.Hour, DryRun: true}
	got, err := w.layout.Prune(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "loose" || !errors.Is(got[0].Err, ErrUncommitted) || got[1].Name != "old" || got[1].Err != nil {
		t.Fatalf("dry run: %+v", got)
	}
	if _, err := os.Stat(old.Path); err != nil {
		t.Errorf("the dry run removed: %v", err)
	}
	opts.DryRun = false
	if _, err := w.layout.Prune(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	left, _ := w.layout.Agents()
	var names []string
	for _, a := range left {
		names = append(names, a.Name)
	}
	if want := []string{"busy", "loose", "recent"}; !slices.Equal(names, want) {
		t.Errorf("left %q, want %q", names, want)
	}
	if _, err := w.layout.Prune(t.Context(), PruneOptions{}); err == nil {
		t.Error("a prune without an age went ahead")
	}
}

// TestADataDirectoryBehindASymlink: git records a worktree's path with
// symlinks resolved; the agent is still found as its worktree.
func TestADataDirectoryBehindASymlink(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	real := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	w.layout = LayoutFor(link, "", w.repo.CommonDir)
	a := w.agent("s")
	w.write(a.Path, "loose.txt", "x\n")
	list, err := w.layout.Statuses(t.Context(), StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list[0].Problems) != 0 || !slices.Equal(list[0].Uncommitted, []string{"loose.txt"}) {
		t.Errorf("problems %q, uncommitted %q", list[0].Problems, list[0].Uncommitted)
	}
	if err := w.layout.Remove(t.Context(), "s", RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(w.git(w.repo.Top, "worktree", "list", "--porcelain"), "/s\n") {
		t.Error("git still lists the worktree")
	}
}
