package gitshadow

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestFingerprinterSeesEveryChange changes the git directory in each way
// Fingerprint notices and checks that the watching fingerprinter agrees
// with a full one after each, and computes nothing when nothing changed.
func TestFingerprinterSeesEveryChange(t *testing.T) {
	requireGit(t)
	ws := newRepo(t)
	git := filepath.Join(ws, ".git")
	l := Layout{GitDirs: []string{""}}
	f := NewFingerprinter(git, l)
	defer f.Close()

	check := func(what string) {
		t.Helper()
		if got, want := f.Fingerprint(), Fingerprint(git, l); got != want {
			t.Fatalf("after %s: fingerprint %s, a full one says %s", what, got, want)
		}
	}
	unchanged := func(what string) {
		t.Helper()
		before := f.full
		check(what)
		if runtime.GOOS == "linux" && f.full != before {
			t.Fatalf("after %s: computed in full although nothing changed", what)
		}
	}
	check("the start")
	unchanged("nothing")
	unchanged("nothing, again")

	write := func(rel, s string) {
		t.Helper()
		p := filepath.Join(git, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	elsewhere := t.TempDir()
	steps := []struct {
		what string
		do   func()
	}{
		{"a write to HEAD", func() { write("HEAD", "ref: refs/heads/other\n") }},
		{"a same-size rewrite with the old mtime", func() {
			p := filepath.Join(git, "HEAD")
			fi, _ := os.Stat(p)
			write("HEAD", "ref: refs/heads/othe2\n")
			os.Chtimes(p, fi.ModTime(), fi.ModTime())
		}},
		{"a mode change", func() { os.Chmod(filepath.Join(git, "HEAD"), 0o600) }},
		{"an mtime change", func() {
			old := time.Now().Add(-time.Hour)
			os.Chtimes(filepath.Join(git, "config"), old, old)
		}},
		{"a ref in new nested directories", func() { write("refs/heads/a/b/c", "0000000000000000000000000000000000000001\n") }},
		{"a ref in the directory made just before", func() { write("refs/heads/a/b/d", "0000000000000000000000000000000000000002\n") }},
		{"a lock renamed over a ref", func() {
			write("refs/heads/a/b/c.lock", "0000000000000000000000000000000000000003\n")
			os.Rename(filepath.Join(git, "refs/heads/a/b/c.lock"), filepath.Join(git, "refs/heads/a/b/c"))
		}},
		{"a write through a hard link outside", func() {
			link := filepath.Join(elsewhere, "head")
			if err := os.Link(filepath.Join(git, "refs/heads/a/b/d"), link); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(link, []byte("0000000000000000000000000000000000000004\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a removed directory of refs", func() { os.RemoveAll(filepath.Join(git, "refs/heads/a")) }},
		{"a stash log where there was no logs/refs", func() {
			os.RemoveAll(filepath.Join(git, "logs"))
			check("logs removed")
			write("logs/refs/stash", "x\n")
		}},
		{"a new pack", func() { write("objects/pack/pack-1.pack", "x") }},
		{"a new submodule directory", func() { write("modules/sub/HEAD", "x") }},
		{"a hook", func() { write("hooks/pre-commit", "#!/bin/sh\n") }},
		{"packed-refs", func() { write("packed-refs", "# pack-refs\n") }},
		{"the index removed", func() { os.Remove(filepath.Join(git, "index")) }},
	}
	for _, s := range steps {
		s.do()
		check(s.what)
		unchanged("nothing after " + s.what)
	}

	// A symlink among the directories: correct, computed every time.
	os.RemoveAll(filepath.Join(git, "info"))
	if err := os.Symlink(elsewhere, filepath.Join(git, "info")); err != nil {
		t.Fatal(err)
	}
	check("info made a symlink")
	os.WriteFile(filepath.Join(elsewhere, "exclude"), []byte("x\n"), 0o644)
	check("a file behind the symlink")
}
