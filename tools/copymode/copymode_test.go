package copymode

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/internal/dirstate"
	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/local"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
	"github.com/shiroagent/shiro/tools"
)

// inProcess is a sandbox whose helper runs Main in this process: the
// protocol end to end, without a container.
func inProcess(t *testing.T, ws string) *Remote {
	t.Helper()
	fake := &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		if len(cmd.Args) < 3 || cmd.Args[0] != "/helper" || cmd.Args[1] != "helper" || cmd.Args[2] != Verb {
			t.Errorf("unexpected command %q", cmd.Args)
			return sandbox.Result{ExitCode: 127}, nil
		}
		stdin := cmd.Stdin
		if stdin == nil {
			stdin = strings.NewReader("")
		}
		stdout, stderr := cmd.Stdout, cmd.Stderr
		if stdout == nil {
			stdout = io.Discard
		}
		if stderr == nil {
			stderr = io.Discard
		}
		return sandbox.Result{ExitCode: Main(cmd.Args[3:], stdin, stdout, stderr)}, nil
	}}
	return &Remote{
		Sandbox:   fake,
		Helper:    func(context.Context) (string, error) { return "/helper", nil },
		Workspace: ws,
		Cache:     filepath.Join(t.TempDir(), "cache"),
	}
}

// tree writes files (a value starting "->" makes a symlink; a name ending
// "*" an executable) under dir.
func tree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := dirstate.Write(dir, files); err != nil {
		t.Fatal(err)
	}
}

// state is a directory's files: content (or "-> target") and mode.
func state(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[filepath.ToSlash(rel)] = "-> " + target
			return err
		}
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = fi.Mode().Perm().String() + " " + string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFileToolsSayTheSameInTheSandbox(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Fatal("grep needs rg: make deps installs it")
	}
	t.Parallel()
	files := map[string]string{
		"README.md":       "# demo\nhello world\n",
		"src/main.go":     "package main\n\nfunc main() { println(\"hello\") }\n",
		"src/util.go":     "package main\n\n// hello again\n",
		"bin/run*":        "#!/bin/sh\necho hi\n",
		"link":            "->src/main.go",
		".gitignore":      "build/\n",
		"build/out.txt":   "ignored hello\n",
		"docs/guide.txt":  "a guide\nwith hello\n",
		"data/blob.bin":   "\x00\x01\x02",
		"nested/a/b/c.md": "deep\n",
	}
	calls := []struct{ tool, input string }{
		{"read_file", `{"path": "README.md"}`},
		{"read_file", `{"path": "src/main.go", "offset": 2, "limit": 1}`},
		{"read_file", `{"path": "missing.txt"}`},
		{"read_file", `{"path": "../outside"}`},
		{"read_file", `{"path": "data/blob.bin"}`},
		{"read_file", `{"path": "src"}`},
		{"read_many_files", `{"paths": ["README.md", "src/*.go"]}`},
		{"list_dir", `{"path": "."}`},
		{"list_dir", `{"path": "nested", "depth": 3}`},
		{"glob", `{"pattern": "**/*.go"}`},
		{"glob", `{"pattern": "build/*"}`},
		{"grep", `{"pattern": "hello"}`},
		{"grep", `{"pattern": "hello", "glob": "*.go", "outputMode": "content"}`},
		{"write_file", `{"path": "new/dir/file.txt", "content": "fresh\n"}`},
		{"edit_file", `{"path": "README.md", "oldString": "hello world", "newString": "hello copy"}`},
		{"edit_file", `{"path": "README.md", "oldString": "not there", "newString": "x"}`},
		{"multi_edit", `{"path": "src/util.go", "edits": [{"oldString": "again", "newString": "once more"}, {"oldString": "package main", "newString": "package util"}]}`},
		{"write_file", `{"path": "bin/run", "content": "#!/bin/sh\necho changed\n"}`},
	}
	hostDir, copyDir := filepath.Join(t.TempDir(), "ws"), filepath.Join(t.TempDir(), "ws")
	tree(t, hostDir, files)
	tree(t, copyDir, files)
	// The texts name the workspace: both sides see the same path, as the
	// sandbox does (the copy is at the workspace's own path there).
	ws := filepath.Join(t.TempDir(), "ws")
	run := func(dir string, remote bool) []string {
		if err := os.Rename(dir, ws); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(ws, dir)
		root, err := os.OpenRoot(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		sb, err := local.New(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		gate, err := hostwrite.New(root, ws)
		if err != nil {
			t.Fatal(err)
		}
		defer gate.Close()
		env := &tools.Env{Workspace: ws, Root: root, Gate: gate, Sandbox: sb}
		r := inProcess(t, ws)
		var out []string
		for _, c := range calls {
			tool := tools.Find(tools.Builtins(), c.tool)
			if remote {
				tool = Wrap(tool, r)
			}
			res, err := tool.Run(t.Context(), env, json.RawMessage(c.input))
			if err != nil {
				t.Fatalf("%s %s: %v", c.tool, c.input, err)
			}
			problem := ""
			if ch, ok := tool.(tools.Checker); ok {
				problem = ch.Check(t.Context(), env, json.RawMessage(c.input))
			}
			out = append(out, c.tool+" "+c.input+"\n"+res.Text+"\nerror: "+map[bool]string{true: "yes", false: "no"}[res.IsError]+"\ncheck: "+problem)
		}
		return out
	}
	host := run(hostDir, false)
	copied := run(copyDir, true)
	for i := range calls {
		if host[i] != copied[i] {
			t.Errorf("call %d differs\n host: %s\n copy: %s", i, host[i], copied[i])
		}
	}
	if h, c := state(t, hostDir), state(t, copyDir); !maps.Equal(h, c) {
		t.Errorf("the trees differ after the calls\n host: %v\n copy: %v", h, c)
	}
}

func TestManifestListsTheWalkersFilesWithGitHashes(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	tree(t, ws, map[string]string{
		"a.txt":          "alpha\n",
		"dir/b.sh*":      "#!/bin/sh\n",
		"dir/link":       "->../a.txt",
		".gitignore":     "*.log\n",
		"x.log":          "ignored\n",
		"node_modules/m": "skipped\n",
	})
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := inProcess(t, ws)
	got, err := r.Manifest(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Path: ".gitignore", Mode: 0o644, Hash: BlobHash([]byte("*.log\n")), Size: 6},
		{Path: "a.txt", Mode: 0o644, Hash: BlobHash([]byte("alpha\n")), Size: 6},
		{Path: "dir/b.sh", Mode: 0o755, Hash: BlobHash([]byte("#!/bin/sh\n")), Size: 10},
		{Path: "dir/link", Mode: fs.ModeSymlink, Hash: BlobHash([]byte("../a.txt")), Size: 8},
	}
	sortEntries(got)
	if !slices.Equal(got, want) {
		t.Errorf("manifest\n got %v\nwant %v", got, want)
	}
	// git agrees on the hashes.
	if out, err := exec.Command("git", "hash-object", filepath.Join(ws, "a.txt")).Output(); err != nil || strings.TrimSpace(string(out)) != want[1].Hash {
		t.Errorf("git hash-object a.txt = %q (%v), want %s", out, err, want[1].Hash)
	}
	only, err := r.Manifest(t.Context(), []string{"a.txt", "missing", "dir/link"})
	if err != nil {
		t.Fatal(err)
	}
	sortEntries(only)
	if !slices.Equal(only, []Entry{want[1], want[3]}) {
		t.Errorf("manifest of named paths = %v", only)
	}
}

func sortEntries(e []Entry) { sort.Slice(e, func(i, j int) bool { return e[i].Path < e[j].Path }) }

func TestManifestCacheSeesEveryChange(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	tree(t, ws, map[string]string{"same.txt": "same\n", "edit.txt": "aaaa\n"})
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{"same.txt", "edit.txt"} {
		if err := os.Chtimes(filepath.Join(ws, n), old, old); err != nil {
			t.Fatal(err)
		}
	}
	r := inProcess(t, ws)
	if _, err := r.Manifest(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Cache); err != nil {
		t.Fatalf("no cache written: %v", err)
	}
	// Same size, and the mtime set back: only the change time tells.
	if err := os.WriteFile(filepath.Join(ws, "edit.txt"), []byte("bbbb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(ws, "edit.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	got, err := r.Manifest(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sortEntries(got)
	if len(got) != 2 || got[0].Hash != BlobHash([]byte("bbbb\n")) || got[1].Hash != BlobHash([]byte("same\n")) {
		t.Errorf("after the edit: %v", got)
	}
}

func TestPackAndUnpackCarryFilesModesAndSymlinks(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	tree(t, src, map[string]string{"a.txt": "alpha\n", "x/run*": "#!/bin/sh\n", "x/l": "->../a.txt", "deep/er/f": "f\n"})
	// In the destination, a file stands where a directory must go and a
	// directory where a file must go.
	tree(t, dst, map[string]string{"deep": "a file in the way\n", "a.txt/inner": "a dir in the way\n", "keep": "kept\n"})
	from, to := inProcess(t, src), inProcess(t, dst)
	err := to.Unpack(t.Context(), func(tw *tar.Writer) error {
		return from.Pack(t.Context(), []string{"a.txt", "x/run", "x/l", "deep/er/f", "missing"}, func(h *tar.Header, content io.Reader) error {
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err := io.Copy(tw, content)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a.txt": "-rw-r--r-- alpha\n", "x/run": "-rwxr-xr-x #!/bin/sh\n", "x/l": "-> ../a.txt", "deep/er/f": "-rw-r--r-- f\n", "keep": "-rw-r--r-- kept\n"}
	if got := state(t, dst); !maps.Equal(got, want) {
		t.Errorf("after unpack\n got %v\nwant %v", got, want)
	}
	if err := to.Remove(t.Context(), []string{"deep/er/f", "x/l", "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "deep")); !os.IsNotExist(err) {
		t.Errorf("the directories the removal emptied are still there: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "x/run")); err != nil {
		t.Errorf("a file not named went: %v", err)
	}
}

func TestPathsLeavingTheCopyAreRefused(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	ws := t.TempDir()
	tree(t, ws, map[string]string{"escape": "->" + outside})
	r := inProcess(t, ws)
	for _, p := range []string{"../x", "/etc/passwd", "escape/../../x"} {
		err := r.Unpack(t.Context(), func(tw *tar.Writer) error {
			if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}); err != nil {
				return err
			}
			_, err := tw.Write([]byte("x"))
			return err
		})
		if err == nil {
			t.Errorf("unpack of %q went through", p)
		}
	}
	// A symlink out of the copy where the tar has a directory is replaced
	// by the directory, inside the copy.
	err := r.Unpack(t.Context(), func(tw *tar.Writer) error {
		if err := tw.WriteHeader(&tar.Header{Name: "escape/f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}); err != nil {
			return err
		}
		_, err := tw.Write([]byte("x"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "escape")); err != nil || !fi.IsDir() {
		t.Errorf("escape is not a directory of the copy now: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("a file was written outside the copy: %v", entries)
	}
	if err := r.Pack(t.Context(), []string{"../x"}, func(*tar.Header, io.Reader) error { return nil }); err == nil {
		t.Error("pack of ../x went through")
	}
	pv, err := r.Read(t.Context(), "../x")
	if err != nil || pv.Problem == "" {
		t.Errorf("read ../x = %+v, %v", pv, err)
	}
}

func TestReadPreviewOfTheCopy(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	tree(t, ws, map[string]string{"a.txt": "alpha\n", "bin": "\x00\x01"})
	r := inProcess(t, ws)
	for _, tt := range []struct {
		path string
		want Preview
	}{
		{"a.txt", Preview{Content: "alpha\n", Exists: true}},
		{"missing", Preview{Problem: "no such file"}},
		{"bin", Preview{Exists: true, Problem: "binary file"}},
	} {
		got, err := r.Read(t.Context(), tt.path)
		if err != nil || got != tt.want {
			t.Errorf("Read(%q) = %+v, %v; want %+v", tt.path, got, err, tt.want)
		}
	}
}

func TestACommandThatFailsIsAToolError(t *testing.T) {
	t.Parallel()
	r := &Remote{
		Sandbox:   &sandboxtest.Fake{RunFunc: sandboxtest.Reply("", "exec: shiro-helper: not found\n", 127)},
		Helper:    func(context.Context) (string, error) { return "/helper", nil },
		Workspace: "/ws",
	}
	res, err := Wrap(tools.NewReadFile(), r).Run(t.Context(), nil, json.RawMessage(`{"path": "a"}`))
	if err != nil || !res.IsError || !strings.Contains(res.Text, "read_file could not run in the sandbox: exec: shiro-helper: not found") {
		t.Errorf("Run = %+v, %v", res, err)
	}
	var buf bytes.Buffer
	if code := Main([]string{"tool", "--ws", t.TempDir(), "bash"}, strings.NewReader(`{}`), &buf, &buf); code != 1 || !strings.Contains(buf.String(), `no file tool "bash"`) {
		t.Errorf("Main tool bash = %d, %q", code, buf.String())
	}
}

// TestManifestDeltaSaysWhatChanged: a manifest asked with the generation
// of the last one lists only what changed, and the deletions; with any
// other generation, everything.
func TestManifestDeltaSaysWhatChanged(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	tree(t, ws, map[string]string{"same.txt": "same\n", "edit.txt": "aaaa\n", "gone.txt": "bye\n", "dir/link": "->../same.txt"})
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{"same.txt", "edit.txt", "gone.txt"} {
		if err := os.Chtimes(filepath.Join(ws, n), old, old); err != nil {
			t.Fatal(err)
		}
	}
	r := inProcess(t, ws)
	first, err := r.ManifestSince(t.Context(), "")
	if err != nil || !first.Full || len(first.Entries) != 4 || first.Gen == "" || first.Gen == "-" {
		t.Fatalf("first manifest = %+v, %v", first, err)
	}
	tree(t, ws, map[string]string{"edit.txt": "bbbb\n", "new.txt": "new\n"})
	if err := os.Remove(filepath.Join(ws, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	d, err := r.ManifestSince(t.Context(), first.Gen)
	if err != nil {
		t.Fatal(err)
	}
	sortEntries(d.Entries)
	var got []string
	for _, e := range d.Entries {
		got = append(got, e.Path)
	}
	if d.Full || strings.Join(got, ",") != "edit.txt,new.txt" || strings.Join(d.Deleted, ",") != "gone.txt" || d.Gen == first.Gen {
		t.Errorf("delta = full %v, entries %v, deleted %v, gen %s", d.Full, got, d.Deleted, d.Gen)
	}
	if d.Entries[0].Hash != BlobHash([]byte("bbbb\n")) {
		t.Errorf("edit.txt's hash in the delta is the old one")
	}
	// Nothing changed: an empty delta. A stale generation: everything.
	if again, err := r.ManifestSince(t.Context(), d.Gen); err != nil || again.Full || len(again.Entries) != 0 || len(again.Deleted) != 0 {
		t.Errorf("a second delta = %+v, %v", again, err)
	}
	if stale, err := r.ManifestSince(t.Context(), first.Gen); err != nil || !stale.Full || len(stale.Entries) != 4 {
		t.Errorf("a delta from a stale generation = %+v, %v", stale, err)
	}
}
