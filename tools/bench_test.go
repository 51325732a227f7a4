package tools

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/internal/treegen"
)

// benchFiles is the size of the generated tree: SHIRO_BENCH_FILES, or 20000.
func benchFiles(b *testing.B) int {
	if s := os.Getenv("SHIRO_BENCH_FILES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("SHIRO_BENCH_FILES: %v", err)
		}
		return n
	}
	return 20000
}

// BenchmarkWalk compares the walker with `git ls-files -co --exclude-standard`
// on the same generated tree (SHIRO_BENCH_FILES files), untracked and with
// every file in the index.
func BenchmarkWalk(b *testing.B) {
	for _, tracked := range []bool{false, true} {
		name := "untracked"
		if tracked {
			name = "indexed"
		}
		b.Run(name, func(b *testing.B) { benchmarkWalk(b, tracked) })
	}
}

func benchmarkWalk(b *testing.B, tracked bool) {
	dir := b.TempDir()
	if err := treegen.Generate(dir, benchFiles(b), 1); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		b.Fatalf("git init: %v: %s", err, out)
	}
	if tracked {
		if out, err := exec.Command("git", "-C", dir, "add", "-A").CombinedOutput(); err != nil {
			b.Fatalf("git add: %v: %s", err, out)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	b.Run("walker", func(b *testing.B) {
		n := 0
		for b.Loop() {
			n = 0
			err := Walk(b.Context(), root, WalkOptions{}, func(string, fs.FileMode) error { n++; return nil })
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "files")
	})
	b.Run("git-ls-files", func(b *testing.B) {
		n := 0
		for b.Loop() {
			out, err := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
			if err != nil {
				b.Fatal(err)
			}
			n = strings.Count(string(out), "\x00")
		}
		b.ReportMetric(float64(n), "files")
	})
}

// BenchmarkReadFiles compares one read_many_files call for 20 files with 20
// read_file calls, for small files (whole result under the cap) and larger
// ones (result cut at the cap).
func BenchmarkReadFiles(b *testing.B) {
	for _, size := range []struct {
		name  string
		lines int
	}{{"20x1KB", 25}, {"20x16KB", 400}} {
		dir := b.TempDir()
		var specs []map[string]string
		for i := range 20 {
			var body strings.Builder
			for l := range size.lines {
				fmt.Fprintf(&body, "line %d of file %d: some source text\n", l, i)
			}
			name := fmt.Sprintf("f%02d.go", i)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body.String()), 0o644); err != nil {
				b.Fatal(err)
			}
			specs = append(specs, map[string]string{"path": name})
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer root.Close()
		env := &Env{Workspace: dir, Root: root}
		many, _ := json.Marshal(map[string]any{"files": specs})
		b.Run(size.name+"/read_many_files", func(b *testing.B) {
			tool := NewReadManyFiles()
			for b.Loop() {
				if _, err := tool.Run(b.Context(), env, many); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(size.name+"/20_read_file_calls", func(b *testing.B) {
			tool := NewReadFile()
			inputs := make([]json.RawMessage, len(specs))
			for i, s := range specs {
				inputs[i], _ = json.Marshal(s)
			}
			for b.Loop() {
				for _, in := range inputs {
					if _, err := tool.Run(b.Context(), env, in); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
