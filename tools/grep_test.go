package tools

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/internal/treegen"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/local"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

// localSandbox returns a sandbox on the host for env's workspace.
func localSandbox(t testing.TB, dir string) *local.Sandbox {
	t.Helper()
	sb, err := local.New(dir)
	if err != nil {
		t.Fatalf("local sandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("close sandbox: %v", err)
		}
	})
	return sb
}

// noRg is a sandbox without rg: starting it fails as a missing binary
// does; everything else runs on next.
func noRg(next sandbox.Sandbox, rgCalls *int) *sandboxtest.Fake {
	var mu sync.Mutex
	return &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		if len(cmd.Args) > 0 && cmd.Args[0] == "rg" {
			mu.Lock()
			*rgCalls++
			mu.Unlock()
			return sandbox.Result{}, fmt.Errorf("start: %w", &exec.Error{Name: "rg", Err: exec.ErrNotFound})
		}
		return next.Run(ctx, cmd)
	}}
}

// grepModes are the two search paths every grep case runs through.
var grepModes = []struct {
	name    string
	sandbox func(t *testing.T, dir string) sandbox.Sandbox
}{
	{"rg", func(t *testing.T, dir string) sandbox.Sandbox { return localSandbox(t, dir) }},
	{"go", func(t *testing.T, dir string) sandbox.Sandbox { return noRg(localSandbox(t, dir), new(int)) }},
}

func requireRg(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("rg"); err != nil {
		t.Fatal("these tests need ripgrep (rg) on PATH")
	}
}

func TestGrep(t *testing.T) {
	t.Parallel()
	requireRg(t)
	manyLines := func(n int, s string) string { return strings.Repeat(s+"\n", n) }
	firstLines := func(file string, from, to int, text string) string {
		var lines []string
		for i := from; i <= to; i++ {
			lines = append(lines, fmt.Sprintf("%s:%d: %s", file, i, text))
		}
		return strings.Join(lines, "\n")
	}
	long := "needle " + strings.Repeat("é", 400)
	tests := []struct {
		name    string
		files   map[string]string
		setup   func(t *testing.T, dir string)
		input   map[string]any
		want    string
		wantErr bool
		prefix  bool // want is a prefix of the result
	}{
		{
			name:  "hits sorted by path then line",
			files: map[string]string{"b/c.txt": "x needle\n", "b.txt": "needle\n", "a.txt": "needle one\nother\nneedle two\n"},
			input: map[string]any{"pattern": "needle"},
			want:  "a.txt:1: needle one\na.txt:3: needle two\nb.txt:1: needle\nb/c.txt:1: x needle",
		},
		{
			name:  "regex syntax",
			files: map[string]string{"a.go": "func Main() {}\nfunc helper() {}\nvar x = 1\n"},
			input: map[string]any{"pattern": `^func [A-Z]\w*\(`},
			want:  "a.go:1: func Main() {}",
		},
		{
			name:  "case-sensitive by default",
			files: map[string]string{"a.txt": "Needle\nneedle\n"},
			input: map[string]any{"pattern": "Needle"},
			want:  "a.txt:1: Needle",
		},
		{
			name:  "ignoreCase",
			files: map[string]string{"a.txt": "Needle\nneedle\nNEEDLE\nnope\n"},
			input: map[string]any{"pattern": "needle", "ignoreCase": true},
			want:  "a.txt:1: Needle\na.txt:2: needle\na.txt:3: NEEDLE",
		},
		{
			name:  "Unicode word and digit classes",
			files: map[string]string{"a.txt": "héllo\nhello\n١٢٣\n"},
			input: map[string]any{"pattern": `^\w+$|^\d+$`},
			want:  "a.txt:1: héllo\na.txt:2: hello\na.txt:3: ١٢٣",
		},
		{
			name:  "include without a slash matches names at any depth",
			files: map[string]string{"main.go": "needle\n", "sub/deep/x.go": "needle\n", "sub/x.txt": "needle\n"},
			input: map[string]any{"pattern": "needle", "include": "*.go"},
			want:  "main.go:1: needle\nsub/deep/x.go:1: needle",
		},
		{
			name:  "include with a slash matches paths",
			files: map[string]string{"main.go": "needle\n", "sub/a.go": "needle\n", "sub/deep/x.go": "needle\n", "other/a.go": "needle\n"},
			input: map[string]any{"pattern": "needle", "include": "sub/*.go"},
			want:  "sub/a.go:1: needle",
		},
		{
			name:  "include with ** and braces",
			files: map[string]string{"main.go": "needle\n", "sub/a.ts": "needle\n", "sub/deep/x.tsx": "needle\n", "sub/deep/x.js": "needle\n"},
			input: map[string]any{"pattern": "needle", "include": "sub/**/*.{ts,tsx}"},
			want:  "sub/a.ts:1: needle\nsub/deep/x.tsx:1: needle",
		},
		{
			name:  "include starting with ./",
			files: map[string]string{"main.go": "needle\n", "a.txt": "needle\n"},
			input: map[string]any{"pattern": "needle", "include": "./*.go"},
			want:  "main.go:1: needle",
		},
		{
			name:    "invalid include glob",
			files:   map[string]string{"a.txt": "needle\n"},
			input:   map[string]any{"pattern": "needle", "include": "[a"},
			want:    "Invalid include glob: [a",
			wantErr: true,
		},
		{
			name: ".gitignore honoured outside a git repository",
			files: map[string]string{
				".gitignore": "*.log\nbuild/\n", "app.log": "needle\n", "build/out.txt": "needle\n",
				"src/a.txt": "needle\n", "src/.gitignore": "local.txt\n", "src/local.txt": "needle\n",
			},
			input: map[string]any{"pattern": "needle"},
			want:  "src/a.txt:1: needle",
		},
		{
			name: "nested .gitignore re-includes",
			files: map[string]string{
				".gitignore": "*.log\n", "a.log": "needle\n", "sub/.gitignore": "!keep.log\n", "sub/keep.log": "needle\n", "sub/b.log": "needle\n",
			},
			input: map[string]any{"pattern": "needle"},
			want:  "sub/keep.log:1: needle",
		},
		{
			name: "include does not reach ignored files",
			files: map[string]string{
				".gitignore": "*.log\n", "a.log": "needle\n", "b.txt": "needle\n",
			},
			input: map[string]any{"pattern": "needle", "include": "*.log"},
			want:  "No matches.",
		},
		{
			name: "includeIgnored searches ignored files, never .git or node_modules",
			files: map[string]string{
				".gitignore": "*.log\n", "a.log": "needle\n", ".git/config": "needle\n",
				"node_modules/m/index.js": "needle\n", "sub/node_modules/x.js": "needle\n", "node_modules.txt": "needle\n",
			},
			input: map[string]any{"pattern": "needle", "includeIgnored": true},
			want:  "a.log:1: needle\nnode_modules.txt:1: needle",
		},
		{
			name: ".git and node_modules skipped without includeIgnored",
			files: map[string]string{
				".git/config": "needle\n", "node_modules/m/index.js": "needle\n", "a.txt": "needle\n",
			},
			input: map[string]any{"pattern": "needle"},
			want:  "a.txt:1: needle",
		},
		{
			name: ".shiroignore, nested",
			files: map[string]string{
				".shiroignore": "secret/\n", "secret/a.txt": "needle\n", "sub/.shiroignore": "*.txt\n",
				"sub/a.txt": "needle\n", "sub/a.md": "needle\n", "top.txt": "needle\n",
			},
			input: map[string]any{"pattern": "needle"},
			want:  "sub/a.md:1: needle\ntop.txt:1: needle",
		},
		{
			name: ".shiroignore re-includes what .gitignore ignores",
			files: map[string]string{
				".gitignore": "*.log\ndist/\n", ".shiroignore": "!keep.log\n!dist/\n", "keep.log": "needle\n", "other.log": "needle\n",
				"dist/out.js": "needle\n",
			},
			input: map[string]any{"pattern": "needle"},
			want:  "dist/out.js:1: needle\nkeep.log:1: needle",
		},
		{
			name: ".shiroignore that ignores itself and all beside it",
			files: map[string]string{
				"private/.shiroignore": "*\n", "private/a.txt": "needle\n", "a.txt": "needle\n",
			},
			input: map[string]any{"pattern": "needle"},
			want:  "a.txt:1: needle",
		},
		{
			name: ".shiroignore ignored by includeIgnored",
			files: map[string]string{
				".shiroignore": "*.txt\n", "a.txt": "needle\n",
			},
			input: map[string]any{"pattern": "needle", "includeIgnored": true},
			want:  "a.txt:1: needle",
		},
		{
			name:  ".rgignore and .ignore are not honoured",
			files: map[string]string{".rgignore": "a.txt\n", "a.txt": "needle\n", "sub/.ignore": "b.txt\n", "sub/b.txt": "needle\n"},
			input: map[string]any{"pattern": "needle"},
			want:  "a.txt:1: needle\nsub/b.txt:1: needle",
		},
		{
			name: "a nested repository's .git/info/exclude is not read",
			files: map[string]string{
				".git/info/exclude": "root.txt\n", "root.txt": "needle\n", "a.txt": "needle\n",
				"vendor/lib/.git/info/exclude": "# comment\nb.txt\n", "vendor/lib/b.txt": "needle\n",
			},
			input: map[string]any{"pattern": "needle"},
			want:  "a.txt:1: needle\nvendor/lib/b.txt:1: needle",
		},
		{
			name:  "hidden files are searched",
			files: map[string]string{".env": "needle\n", ".config/x": "needle\n"},
			input: map[string]any{"pattern": "needle"},
			want:  ".config/x:1: needle\n.env:1: needle",
		},
		{
			name: "binary files skipped",
			files: map[string]string{
				"bin.dat": "needle\x00\n", "text.txt": "needle\n",
				"utf16.txt": "\xff\xfen\x00e\x00e\x00d\x00l\x00e\x00\n\x00",
			},
			input: map[string]any{"pattern": "needle|n.e.e.d"},
			want:  "text.txt:1: needle",
		},
		{
			name: "a NUL past the first 8 KiB does not make a file binary",
			files: map[string]string{
				"late.txt":  "needle\n" + strings.Repeat("x", 9000) + "\nnul \x00 needle\nneedle again\n",
				"later.txt": "needle\n" + strings.Repeat("x", 200000) + "\n\x00\nneedle end\n",
			},
			input: map[string]any{"pattern": "needle"},
			want:  "late.txt:1: needle\nlate.txt:3: nul \x00 needle\nlate.txt:4: needle again\nlater.txt:1: needle\nlater.txt:4: needle end",
		},
		{
			name:  "one file with a late NUL",
			files: map[string]string{"late.txt": "needle\n" + strings.Repeat("x", 9000) + "\nneedle again\n\x00"},
			input: map[string]any{"pattern": "needle"},
			want:  "late.txt:1: needle\nlate.txt:3: needle again",
		},
		{
			name:  "long lines cut to 300 characters",
			files: map[string]string{"a.txt": long + "\n"},
			input: map[string]any{"pattern": "needle"},
			want:  "a.txt:1: " + string([]rune(long)[:300]),
		},
		{
			name:  "invalid UTF-8 shown as replacement characters",
			files: map[string]string{"a.txt": "needle \xff\xfe end\n"},
			input: map[string]any{"pattern": "needle"},
			want:  "a.txt:1: needle \uFFFD\uFFFD end",
		},
		{
			name:  "CRLF line endings",
			files: map[string]string{"a.txt": "needle\r\nx\r\nneedle 2\r\n"},
			input: map[string]any{"pattern": "needle"},
			want:  "a.txt:1: needle\na.txt:3: needle 2",
		},
		{
			name:  "last line without a newline",
			files: map[string]string{"a.txt": "x\nneedle"},
			input: map[string]any{"pattern": "needle"},
			want:  "a.txt:2: needle",
		},
		{
			name:  "at most 200 lines per file",
			files: map[string]string{"a.txt": manyLines(250, "needle")},
			input: map[string]any{"pattern": "needle"},
			want:  firstLines("a.txt", 1, 200, "needle"),
		},
		{
			name:  "at most 200 lines in all, with a note",
			files: map[string]string{"a.txt": manyLines(150, "needle"), "b.txt": manyLines(150, "needle")},
			input: map[string]any{"pattern": "needle"},
			want:  firstLines("a.txt", 1, 150, "needle") + "\n" + firstLines("b.txt", 1, 50, "needle") + "\n... [hit limit 200]",
		},
		{
			name: "the limit keeps the first files by path",
			files: func() map[string]string {
				m := map[string]string{}
				for i := range 300 {
					m[fmt.Sprintf("d%d/f%03d.txt", i%7, i)] = "needle\n"
				}
				return m
			}(),
			input: map[string]any{"pattern": "needle"},
			want: func() string {
				var names []string
				for i := range 300 {
					names = append(names, fmt.Sprintf("d%d/f%03d.txt:1: needle", i%7, i))
				}
				slices.Sort(names)
				return strings.Join(names[:200], "\n") + "\n... [hit limit 200]"
			}(),
		},
		{
			name:  "no match",
			files: map[string]string{"a.txt": "haystack\n"},
			input: map[string]any{"pattern": "needle"},
			want:  "No matches.",
		},
		{
			name:  "empty workspace",
			input: map[string]any{"pattern": "needle"},
			want:  "No matches.",
		},
		{
			name:    "invalid regex",
			files:   map[string]string{"a.txt": "needle\n"},
			input:   map[string]any{"pattern": "needle("},
			want:    "Invalid regex: ",
			wantErr: true,
			prefix:  true,
		},
		{
			name:    "invalid regex with nothing to search",
			files:   map[string]string{".shiroignore": "!x\n*\n"},
			input:   map[string]any{"pattern": "(", "include": "*.go"},
			want:    "Invalid regex: ",
			wantErr: true,
			prefix:  true,
		},
		{
			name:    "a literal newline is an invalid regex",
			files:   map[string]string{"a.txt": "needle\n"},
			input:   map[string]any{"pattern": `a\nb`},
			want:    "Invalid regex: ",
			wantErr: true,
			prefix:  true,
		},
		{
			name:  "pattern starting with a dash",
			files: map[string]string{"a.txt": "a -v b\n"},
			input: map[string]any{"pattern": "-v"},
			want:  "a.txt:1: a -v b",
		},
		{
			name:  "paths with colons, spaces and dashes",
			files: map[string]string{"a:1: b.txt": "needle\n", "-rf": "needle\n"},
			input: map[string]any{"pattern": "needle"},
			want:  "-rf:1: needle\na:1: b.txt:1: needle",
		},
		{
			name:  "symlinks are not followed",
			files: map[string]string{"target.txt": "needle\n", "dir/a.txt": "needle\n"},
			setup: func(t *testing.T, dir string) {
				for link, target := range map[string]string{"link.txt": "target.txt", "linkdir": "dir"} {
					if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
						t.Fatal(err)
					}
				}
			},
			input: map[string]any{"pattern": "needle"},
			want:  "dir/a.txt:1: needle\ntarget.txt:1: needle",
		},
		{
			name:    "unknown parameter",
			input:   map[string]any{"pattern": "x", "path": "src"},
			want:    `Invalid input for grep: unknown parameter "path"`,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, mode := range grepModes {
				t.Run(mode.name, func(t *testing.T) {
					t.Parallel()
					env := newTestEnv(t, tt.files)
					if tt.setup != nil {
						tt.setup(t, env.Workspace)
					}
					env.Sandbox = mode.sandbox(t, env.Workspace)
					got := call(t, NewGrep(), env, jsonInput(t, tt.input))
					if tt.prefix {
						if !strings.HasPrefix(got.Text, tt.want) || got.IsError != tt.wantErr {
							t.Errorf("result = %q (error %v), want a prefix %q (error %v)", got.Text, got.IsError, tt.want, tt.wantErr)
						}
						return
					}
					checkResult(t, got, tt.want, tt.wantErr)
				})
			}
		})
	}
}

// TestGrepRgArgv checks the argv rg gets: the spec's flags, fixed, never a
// shell string, in the workspace, with the 60 s timeout, and the walker's
// files by name after "--".
func TestGrepRgArgv(t *testing.T) {
	t.Parallel()
	base := []string{"rg", "--no-config", "--line-number", "--no-heading", "--color", "never", "--max-count", "200", "--with-filename", "--null", "--encoding", "none"}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	tests := []struct {
		name  string
		input map[string]any
		want  []string
	}{
		{"defaults", map[string]any{"pattern": "a b; $(x)"},
			cat(base, []string{"--regexp", "a b; $(x)", "--", "a.go"})},
		{"every option", map[string]any{"pattern": "-x", "include": "*.go", "ignoreCase": true, "includeIgnored": true},
			cat(base, []string{"--ignore-case", "--regexp", "-x", "--", "a.go"})},
		{"include rg would read differently is filtered in Go only", map[string]any{"pattern": "x", "include": `!a\*`},
			cat(base, []string{"--regexp", "x", "--", os.DevNull})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, map[string]string{"a.go": "x\n"})
			var got []sandbox.Command
			env.Sandbox = &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
				got = append(got, cmd)
				return sandbox.Result{ExitCode: 1}, nil
			}}
			res := call(t, NewGrep(), env, jsonInput(t, tt.input))
			checkResult(t, res, "No matches.", false)
			if len(got) != 1 {
				t.Fatalf("%d commands run, want 1", len(got))
			}
			cmd := got[0]
			if !slices.Equal(cmd.Args, tt.want) {
				t.Errorf("argv\n got %q\nwant %q", cmd.Args, tt.want)
			}
			if cmd.Shell != "" || cmd.Dir != env.Workspace || cmd.Timeout != 60*time.Second {
				t.Errorf("shell %q, dir %q, timeout %v; want no shell, %q, 60s", cmd.Shell, cmd.Dir, cmd.Timeout, env.Workspace)
			}
		})
	}
}

// TestGrepRgOutcomes covers how rg's exit is read, with a fake sandbox.
func TestGrepRgOutcomes(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a.txt": "needle\n", "b.txt": "needle\n"}
	notFound := func(context.Context, sandbox.Command) (sandbox.Result, error) {
		return sandbox.Result{}, &exec.Error{Name: "rg", Err: exec.ErrNotFound}
	}
	tests := []struct {
		name     string
		rg       func(context.Context, sandbox.Command) (sandbox.Result, error)
		want     string
		wantErr  bool
		rgCalls  int // over two grep calls
		goErrors bool
	}{
		{name: "hits", rg: sandboxtest.Reply("./b.txt\x001:needle\n./a.txt\x001:needle\n", "", 0),
			want: "a.txt:1: needle\nb.txt:1: needle", rgCalls: 2},
		{name: "hits outside the walker's files are dropped", rg: sandboxtest.Reply("./c.txt\x001:needle\n./a.txt\x001:needle\n", "", 0),
			want: "a.txt:1: needle", rgCalls: 2},
		{name: "exit 1 is no match", rg: sandboxtest.Reply("", "", 1), want: "No matches.", rgCalls: 2},
		{name: "regex parse error", rg: sandboxtest.Reply("", "regex parse error:\n    (\n    ^\nerror: unclosed group\n", 2),
			want: "Invalid regex: regex parse error:\n    (\n    ^\nerror: unclosed group", wantErr: true, rgCalls: 2},
		{name: "unreadable files are skipped", rg: sandboxtest.Reply("./a.txt\x001:needle\n", "rg: ./b.txt: Permission denied (os error 13)\n", 2),
			want: "a.txt:1: needle", rgCalls: 2},
		{name: "other failures fall back to Go, and rg is tried again next time",
			rg:   sandboxtest.Reply("", "error: Found argument '--no-require-git' which wasn't expected\n", 2),
			want: "a.txt:1: needle\nb.txt:1: needle", rgCalls: 2},
		{name: "missing rg falls back to Go, once", rg: notFound,
			want: "a.txt:1: needle\nb.txt:1: needle", rgCalls: 1},
		{name: "exit 127 falls back to Go, once", rg: sandboxtest.Reply("", "rg: not found\n", 127),
			want: "a.txt:1: needle\nb.txt:1: needle", rgCalls: 1},
		{name: "timeout", rg: func(context.Context, sandbox.Command) (sandbox.Result, error) {
			return sandbox.Result{ExitCode: 137, Signal: "SIGKILL", TimedOut: true}, nil
		}, want: "grep timed out after 1m0s; narrow the search with include or a more specific pattern.", wantErr: true, rgCalls: 2},
		{name: "a failing sandbox is a Go error", rg: func(context.Context, sandbox.Command) (sandbox.Result, error) {
			return sandbox.Result{}, sandbox.ErrClosed
		}, goErrors: true, rgCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, files)
			var mu sync.Mutex
			calls := 0
			env.Sandbox = &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
				mu.Lock()
				calls++
				mu.Unlock()
				return tt.rg(ctx, cmd)
			}}
			tool := NewGrep()
			for range 2 {
				res, err := tool.Run(t.Context(), env, []byte(`{"pattern":"needle"}`))
				if tt.goErrors {
					if err == nil {
						t.Fatalf("Run = %q, want a Go error", res.Text)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				checkResult(t, res, tt.want, tt.wantErr)
			}
			if calls != tt.rgCalls {
				t.Errorf("rg run %d times over two calls, want %d", calls, tt.rgCalls)
			}
		})
	}
}

// TestGrepMissingRgIsPerEnv: one Env's missing rg says nothing of another's.
func TestGrepMissingRgIsPerEnv(t *testing.T) {
	t.Parallel()
	requireRg(t)
	tool := NewGrep()
	files := map[string]string{"a.txt": "needle\n"}
	without := newTestEnv(t, files)
	calls := 0
	without.Sandbox = noRg(localSandbox(t, without.Workspace), &calls)
	with := newTestEnv(t, files)
	ran := false
	sb := localSandbox(t, with.Workspace)
	with.Sandbox = &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		ran = true
		return sb.Run(ctx, cmd)
	}}
	for _, env := range []*Env{without, with, without} {
		checkResult(t, call(t, tool, env, `{"pattern":"needle"}`), "a.txt:1: needle", false)
	}
	if calls != 1 || !ran {
		t.Errorf("rg tried %d times without rg (want 1); ran with rg: %v", calls, ran)
	}
}

// TestGrepCancel: a cancelled call is a Go error and leaves nothing running.
func TestGrepCancel(t *testing.T) {
	t.Parallel()
	for _, mode := range grepModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, map[string]string{"a.txt": "needle\n"})
			env.Sandbox = mode.sandbox(t, env.Workspace)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if res, err := NewGrep().Run(ctx, env, []byte(`{"pattern":"needle"}`)); err == nil {
				t.Errorf("Run = %q, want a Go error", res.Text)
			}
		})
	}
}

// TestGrepCancelLeavesNothingRunning cancels a grep while rg runs and
// checks that, once Run returned, no process works in the workspace.
func TestGrepCancelLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	requireRg(t)
	if _, err := os.Stat("/proc/self/cwd"); err != nil {
		t.Fatalf("this test reads /proc: %v", err)
	}
	files := make(map[string]string, 2000)
	for i := range 2000 {
		files[fmt.Sprintf("d%02d/f%d.txt", i%40, i)] = strings.Repeat("haystack without the word\n", 400)
	}
	env := newTestEnv(t, files)
	env.Sandbox = localSandbox(t, env.Workspace)

	// Cancel as soon as a process runs in the workspace.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sawRg := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if len(processesIn(env.Workspace)) > 0 {
				cancel()
				sawRg <- true
				return
			}
			time.Sleep(time.Millisecond)
		}
		sawRg <- false
	}()
	res, err := NewGrep().Run(ctx, env, []byte(`{"pattern":"needle"}`))
	cancel()
	if !<-sawRg {
		t.Fatalf("no process ever ran in the workspace (Run = %q, %v)", res.Text, err)
	}
	if err == nil {
		t.Errorf("Run = %q after cancel, want a Go error", res.Text)
	}
	if left := processesIn(env.Workspace); len(left) > 0 {
		t.Errorf("after Run returned, still running in the workspace: %v", left)
	}
}

// processesIn lists the processes whose working directory is dir or below.
func processesIn(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+"/")) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.TrimSpace(string(comm))))
	}
	return out
}

func TestTranslateRegex(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`\d+`, `\p{Nd}+`},
		{`\w\W\s\S\D`, `[\p{L}\p{M}\p{Nd}\p{Pc}][^\p{L}\p{M}\p{Nd}\p{Pc}][\t-\r \x{85}\p{Z}][^\t-\r \x{85}\p{Z}]\P{Nd}`},
		{`[\w-]`, `[\p{L}\p{M}\p{Nd}\p{Pc}-]`},
		{`[]\d]`, `[]\p{Nd}]`},
		{`[^]\s]`, `[^]\t-\r \x{85}\p{Z}]`},
		{`[[:alpha:]\d]x\d`, `[[:alpha:]\p{Nd}]x\p{Nd}`},
		{`\\d`, `\\d`},
		{`\bfoo\.`, `\bfoo\.`},
		{`[\W]`, `[\W]`},
	}
	for _, tt := range tests {
		if got := translateRegex(tt.in); got != tt.want {
			t.Errorf("translateRegex(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestGrepParityOnGeneratedTrees compares rg and the Go search on trees
// with many nested, randomly generated ignore files.
func TestGrepParityOnGeneratedTrees(t *testing.T) {
	t.Parallel()
	requireRg(t)
	patterns := []map[string]any{
		{"pattern": "go"},
		{"pattern": `\.txt$`},
		{"pattern": "LOG", "ignoreCase": true},
		{"pattern": "a", "include": "*.go"},
		{"pattern": "[a-z]", "include": "src/**"},
		{"pattern": "e", "includeIgnored": true},
		{"pattern": "late|binary"},
	}
	for seed := range int64(4) {
		// Odd seeds lose their .shiroignore files: rg then walks the
		// whole tree itself; with them, parts go by name.
		strip := seed%2 == 1
		t.Run(fmt.Sprintf("seed %d, .shiroignore files %v", seed, !strip), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := generateGrepTree(dir, 1500, seed); err != nil {
				t.Fatal(err)
			}
			if strip {
				removeShiroignores(t, dir)
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			sb := localSandbox(t, dir)
			rgEnv := &Env{Workspace: dir, Root: root, Sandbox: sb}
			goEnv := &Env{Workspace: dir, Root: root, Sandbox: noRg(sb, new(int))}
			for _, in := range patterns {
				input := jsonInput(t, in)
				got, want := call(t, NewGrep(), rgEnv, input), call(t, NewGrep(), goEnv, input)
				if got != want {
					t.Errorf("grep %s: rg and Go differ\n%s", input, lineDiff(want.Text, got.Text))
				}
			}
		})
	}
}

func removeShiroignores(t testing.TB, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == ".shiroignore" {
			err = os.Remove(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			fmt.Fprintf(&b, "only Go: %q\n", l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "only rg: %q\n", l)
		}
	}
	return b.String()
}

var grepWords = []string{
	"func", "main", "return", "if", "err", "nil", "go", "log", "needle", "struct",
	"LOG", "Txt", "é", "x", "package", "import", "for", "range", "string", "int",
}

// generateGrepTree makes a treegen tree (nested .gitignore and .shiroignore
// files) and fills its files with lines of words; one file in 50 is binary
// and one in 50 has a NUL far past the sniffed bytes.
func generateGrepTree(dir string, files int, seed int64) error {
	if err := treegen.Generate(dir, files, seed); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if name := d.Name(); name == ".gitignore" || name == ".shiroignore" {
			return nil
		}
		var b strings.Builder
		switch r.IntN(50) {
		case 0:
			b.WriteString("\x00binary ")
		case 1:
			b.WriteString(strings.Repeat("pad\n", 3000) + "\x00late nul\n")
		}
		for range 5 + r.IntN(60) {
			for i := range 3 + r.IntN(8) {
				if i > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(grepWords[r.IntN(len(grepWords))])
			}
			b.WriteByte('\n')
		}
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(b.String())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// TestGrepByName checks which files rg is given by name: the walker's, in
// path order, whatever rg's own ignore rules would say of them, and the
// hits are those of the Go search.
func TestGrepByName(t *testing.T) {
	t.Parallel()
	requireRg(t)
	files := map[string]string{
		".gitignore": "*.log\nbuild/\n", "a.txt": "needle\n", "a.log": "needle\n",
		"sub/.shiroignore": "!keep.log\n!build/\n*.md\n", "sub/keep.log": "needle\n", "sub/other.log": "needle\n",
		"sub/b.txt": "needle\n", "sub/b.md": "needle\n", "sub/build/c.txt": "needle\n", "build/d.txt": "needle\n",
		"linked/a.txt": "needle\n", "linked/b.txt": "needle\n", "rules": "a.txt\n",
		"rg/.rgignore": "a.txt\n", "rg/a.txt": "needle\n",
	}
	env := newTestEnv(t, files)
	if err := os.Symlink("../rules", filepath.Join(env.Workspace, "linked", ".gitignore")); err != nil {
		t.Fatal(err)
	}
	var named []string
	sb := localSandbox(t, env.Workspace)
	env.Sandbox = &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		named = append(named, cmd.Args[slices.Index(cmd.Args, "--")+1:]...)
		return sb.Run(ctx, cmd)
	}}
	const hits = "a.txt:1: needle\nlinked/a.txt:1: needle\nlinked/b.txt:1: needle\nrg/a.txt:1: needle\n" +
		"sub/b.txt:1: needle\nsub/build/c.txt:1: needle\nsub/keep.log:1: needle"
	checkResult(t, call(t, NewGrep(), env, `{"pattern":"needle"}`), hits, false)
	want := []string{".gitignore", "a.txt", "linked/a.txt", "linked/b.txt", "rg/.rgignore", "rg/a.txt", "rules",
		"sub/.shiroignore", "sub/b.txt", "sub/build/c.txt", "sub/keep.log"}
	if !slices.Equal(named, want) {
		t.Errorf("rg given %q, want %q", named, want)
	}
	for _, mode := range grepModes {
		env.Sandbox = mode.sandbox(t, env.Workspace)
		checkResult(t, call(t, NewGrep(), env, `{"pattern":"needle"}`), hits, false)
	}
}

// TestGrepBatches checks that rg is given the walker's files in path order,
// in runs whose names fit in rgArgBytes, and that once more than 200 lines
// matched the runs left (whose files sort after every hit kept) are not
// started.
func TestGrepBatches(t *testing.T) {
	t.Parallel()
	requireRg(t)
	// Names of about 2 KiB: a little over 120 to a run.
	var deep []string
	for i := range 10 {
		deep = append(deep, fmt.Sprintf("%d%s", i, strings.Repeat("x", 199)))
	}
	dir := strings.Join(deep, "/")
	files := map[string]string{}
	var names []string
	for i := range 130 * (rgRunsAtOnce + 2) {
		name := fmt.Sprintf("%s/f%04d.txt", dir, i)
		names = append(names, name)
		files[name] = "needle\nhaystack\nneedle\n"
	}
	slices.Sort(names)
	env := newTestEnv(t, files)
	sb := localSandbox(t, env.Workspace)
	var mu sync.Mutex
	var runs [][]string
	env.Sandbox = &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		mu.Lock()
		runs = append(runs, cmd.Args[slices.Index(cmd.Args, "--")+1:])
		mu.Unlock()
		return sb.Run(ctx, cmd)
	}}

	checkResult(t, call(t, NewGrep(), env, `{"pattern":"nothing"}`), "No matches.", false)
	if len(runs) <= rgRunsAtOnce+1 {
		t.Fatalf("%d rg runs for %d long names, want over %d", len(runs), len(names), rgRunsAtOnce+1)
	}
	slices.SortFunc(runs, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	var all []string
	for i, run := range runs {
		size := 0
		for _, name := range run {
			size += len(name) + 1
		}
		if size > rgArgBytes {
			t.Errorf("run %d names %d bytes, over %d", i, size, rgArgBytes)
		}
		all = append(all, run...)
	}
	if !slices.Equal(all, names) {
		t.Errorf("rg given %d names in all, want the walker's %d in path order", len(all), len(names))
	}

	runs = nil
	var want []string
	for _, name := range names[:100] {
		want = append(want, name+":1: needle", name+":3: needle")
	}
	// The long names make the result pass the output cap.
	got := call(t, NewGrep(), env, `{"pattern":"needle"}`)
	if wantText := Cap(strings.Join(want, "\n") + "\n... [hit limit 200]"); got.Text != wantText || got.IsError {
		t.Errorf("result (%d lines) differs from the first 200 hits by path, capped (%d lines)",
			strings.Count(got.Text, "\n"), strings.Count(wantText, "\n"))
	}
	if len(runs) > rgRunsAtOnce {
		t.Errorf("%d rg runs after the hit limit was passed in the first, want at most %d", len(runs), rgRunsAtOnce)
	}
}

// TestGrepMissingRgOnEnvCopies: the agent runs each call on a copy of the
// session's Env; a missing rg is still found once per sandbox.
func TestGrepMissingRgOnEnvCopies(t *testing.T) {
	t.Parallel()
	session := newTestEnv(t, map[string]string{"a.txt": "needle\n"})
	calls := 0
	session.Sandbox = noRg(localSandbox(t, session.Workspace), &calls)
	tool := NewGrep()
	for range 3 {
		env := *session
		checkResult(t, call(t, tool, &env, `{"pattern":"needle"}`), "a.txt:1: needle", false)
	}
	if calls != 1 {
		t.Errorf("rg tried %d times over three calls on copies of one Env, want 1", calls)
	}
}
