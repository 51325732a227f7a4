package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/internal/treegen"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/gitshadow"
	"github.com/shiroagent/shiro/tools"
)

// gitBench measures what the git boundary costs: a call on the channel in
// a repository (the shadow's fingerprint and the workspace scan around
// it) against the same call in a directory that is none, the git_status
// tool, and a commit made in the sandbox (exported, checked, imported).
func gitBench(ctx context.Context, r *report) error {
	repo, err := os.MkdirTemp("", "shiro-bench-git-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(repo)
	if err := gitRepoWithFiles(repo, 2000); err != nil {
		return err
	}
	plain, err := os.MkdirTemp("", "shiro-bench-plain-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(plain)

	_, inRepo, doneRepo, err := openSandbox(ctx, repo)
	if err != nil {
		return err
	}
	defer doneRepo()
	_, inPlain, donePlain, err := openSandbox(ctx, plain)
	if err != nil {
		return err
	}
	defer donePlain()

	call := func(sb sandbox.Sandbox) func() error {
		return func() error {
			_, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}})
			return err
		}
	}
	for range 10 {
		if err := errors.Join(call(inRepo)(), call(inPlain)()); err != nil {
			return err
		}
	}
	var withRepo, without []time.Duration
	for range 100 { // alternate, so load on the machine hits both alike
		a, err := timeN(1, call(inRepo))
		if err != nil {
			return err
		}
		b, err := timeN(1, call(inPlain))
		if err != nil {
			return err
		}
		withRepo, without = append(withRepo, a...), append(without, b...)
	}
	r.section("git boundary (issue 11)")
	r.add("channel call in a repository of 2,000 files, median of 100", ms(median(withRepo)), "<= 5 ms", median(withRepo) <= 5*time.Millisecond)
	r.add("channel call in a directory that is no repository", ms(median(without)), "", true)

	w, err := workspace.Open(repo)
	if err != nil {
		return err
	}
	defer w.Close()
	root := w.Root()
	env := &tools.Env{Workspace: repo, Root: root, Sandbox: inRepo}
	status := tools.NewGitStatus()
	runStatus := func() error {
		res, err := status.Run(ctx, env, []byte(`{}`))
		if err == nil && res.IsError {
			err = fmt.Errorf("git_status: %s", res.Text)
		}
		return err
	}
	bare := func() error {
		_, err := inRepo.Run(ctx, sandbox.Command{Args: []string{"git", "status", "--porcelain"}, Dir: repo})
		return err
	}
	if err := errors.Join(runStatus(), bare()); err != nil {
		return err
	}
	var viaTool, direct []time.Duration
	for range 20 {
		a, err := timeN(1, runStatus)
		if err != nil {
			return err
		}
		b, err := timeN(1, bare)
		if err != nil {
			return err
		}
		viaTool, direct = append(viaTool, a...), append(direct, b...)
	}
	r.add("git_status through the tool, median of 20", ms(median(viaTool)), "", true)
	r.add("git status --porcelain on the channel", ms(median(direct)), "", true)

	// A commit in the sandbox: the command, then the export of the new
	// objects and refs and their checked import on the host.
	n := 0
	commit := func() error {
		n++
		res, err := inRepo.Run(ctx, sandbox.Command{Shell: fmt.Sprintf("echo %d >> f0.txt && git -c user.email=b@b -c user.name=b commit -qam c%d", n, n), Dir: repo})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("commit: exit %d", res.ExitCode)
		}
		return err
	}
	commits, err := timeN(10, commit)
	if err != nil {
		return err
	}
	out, err := exec.Command("git", "-C", repo, "rev-list", "--count", "HEAD").Output()
	if err != nil {
		return err
	}
	r.add("git commit in the sandbox, in the host's log when it returns, median of 10", ms(median(commits)), "", true)
	r.add("commits on the host's branch afterwards", string(out[:len(out)-1]), "11", string(out[:len(out)-1]) == "11")
	if err := settleBench(ctx, r, repo); err != nil {
		return err
	}
	return scanBench(r)
}

// settleBench measures the end of a workspace's last session (the
// container frozen, cleared of all but its init, the final scan, thawed)
// against the end of a session that is not the last (its scan alone): in
// each round a session whose command left processes running closes while
// another is open, then the other, after the same command, closes last.
func settleBench(ctx context.Context, r *report, repo string) error {
	const leave = "sleep 60 & (sleep 61 &) ; setsid sleep 62 & echo x > settle.txt"
	eng, err := docker.Connect(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	open := func() (*docker.Sandbox, error) {
		return eng.Open(ctx, docker.Reference(images.Tag()), docker.Options{Spec: sandbox.Spec{Workspace: repo, HelperBinary: os.Getenv("SHIRO_BIN") + "-helper"}})
	}
	closeAfter := func(sb *docker.Sandbox) (time.Duration, error) {
		if _, err := sb.Run(ctx, sandbox.Command{Shell: leave, Dir: repo}); err != nil {
			return 0, err
		}
		start := time.Now()
		err := sb.Close()
		return time.Since(start), err
	}
	var notLast, last []time.Duration
	for range 10 {
		a, err := open()
		if err != nil {
			return err
		}
		b, err := open()
		if err != nil {
			a.Close()
			return err
		}
		da, err := closeAfter(a)
		if err != nil {
			b.Close()
			return err
		}
		db, err := closeAfter(b)
		if err != nil {
			return err
		}
		notLast, last = append(notLast, da), append(last, db)
	}
	cost := median(last) - median(notLast)
	r.add("the end of a session that is not the last (channel closed, final scan), median of 10", ms(median(notLast)), "", true)
	r.add("the end of the last session (frozen, cleared, scanned, thawed), median of 10", ms(median(last)), "", true)
	r.add("freeze, kill and scan at the last session's end, in a repository of 2,000 files", ms(cost), "<= 200 ms", cost <= 200*time.Millisecond)
	return nil
}

// scanBench measures the scan for repositories the sandbox made on the
// 100,000-file generated tree: the first one, then one after a command
// that changed nothing, with inotify and with the change-time walk.
func scanBench(r *report) error {
	dir, err := os.MkdirTemp("", "shiro-bench-scan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := treegen.Generate(dir, 100_000, 1); err != nil {
		return err
	}
	w, err := workspace.Open(dir)
	if err != nil {
		return err
	}
	defer w.Close()
	root := w.Root()
	for _, mode := range []string{"inotify", "change-time walk"} {
		s := gitshadow.NewScanner(dir, root, "/.shiro/state/git")
		if mode != "inotify" {
			s.Close()
		}
		first, err := timeN(1, func() error { _, err := s.Scan(); return err })
		if err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // past the change-time walk's racy window
		if _, err := s.Scan(); err != nil {
			return err
		}
		again, err := timeN(20, func() error { _, err := s.Scan(); return err })
		s.Close()
		if err != nil {
			return err
		}
		r.add("scan of the 100,000-file tree, first ("+mode+")", ms(first[0]), "", true)
		r.add("scan after a command that changed nothing ("+mode+"), median of 20", ms(median(again)), "", true)
	}
	return nil
}

// gitRepoWithFiles makes a repository with n committed files.
func gitRepoWithFiles(dir string, n int) error {
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%40))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "f0.txt"), []byte("0\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.email=b@b", "-c", "user.name=b", "commit", "-qm", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v\n%s", args, err, out)
		}
	}
	return nil
}
