package tools

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/internal/treegen"
)

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

// BenchmarkGrep compares the grep tool with rg run directly (the spec's
// argv) through the same local sandbox, on a generated tree of
// SHIRO_BENCH_FILES files (default 20000): with its random .shiroignore
// files (some with "!" rules: rg is given the files by name) and with
// none (rg walks the tree itself).
func BenchmarkGrep(b *testing.B) {
	requireRg(b)
	for _, shiroignore := range []bool{false, true} {
		dir := b.TempDir()
		if err := generateGrepTree(dir, benchFiles(b), 1); err != nil {
			b.Fatal(err)
		}
		if !shiroignore {
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Name() == ".shiroignore" {
					err = os.Remove(p)
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { root.Close() })
		sb := localSandbox(b, dir)
		env := &Env{Workspace: dir, Root: root, Sandbox: sb}
		for _, pattern := range []string{"needle main", "func"} {
			name := fmt.Sprintf("shiroignore=%v/pattern=%s", shiroignore, pattern)
			b.Run(name+"/tool", func(b *testing.B) {
				tool := NewGrep()
				input, err := json.Marshal(map[string]any{"pattern": pattern})
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					res, err := tool.Run(b.Context(), env, input)
					if err != nil || res.IsError {
						b.Fatalf("grep: %v %s", err, res.Text)
					}
				}
			})
			b.Run(name+"/rg", func(b *testing.B) {
				args := []string{"rg", "--line-number", "--no-heading", "--color", "never", "--no-require-git",
					"--max-count", "200", "--regexp", pattern, "."}
				for b.Loop() {
					res, err := sb.Run(b.Context(), sandbox.Command{Args: args, Dir: dir, Stdout: io.Discard, Stderr: io.Discard})
					if err != nil || res.ExitCode > 1 {
						b.Fatalf("rg: %v, exit %d", err, res.ExitCode)
					}
				}
			})
		}
	}
}
