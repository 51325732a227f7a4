package gitshadow

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// importFixture is a repository made by the real git for the import
// benchmarks: 2,000 files over 20 commits, so its pack holds deltas, and
// as many loose objects again.
type importFixture struct {
	pack     string            // a pack git wrote, with its index beside it
	loose    map[string][]byte // loose object files, by id
	indexV2  []byte
	indexV4  []byte
	packName string
}

func newImportFixture(b *testing.B) importFixture {
	b.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git not installed")
	}
	ws := b.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+ws, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q", "-b", "main")
	for c := range 20 {
		for i := range 100 {
			name := filepath.Join(ws, fmt.Sprintf("d%d/f%d.txt", i%10, c*100+i))
			os.MkdirAll(filepath.Dir(name), 0o755)
			os.WriteFile(name, []byte(strings.Repeat(fmt.Sprintf("line %d of commit %d\n", i, c), 40)), 0o644)
		}
		// Edit earlier files too, so the pack has delta chains.
		for i := range c * 100 {
			if i%7 == 0 {
				name := filepath.Join(ws, fmt.Sprintf("d%d/f%d.txt", i%10, i))
				f, _ := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
				fmt.Fprintf(f, "edit %d\n", c)
				f.Close()
			}
		}
		git("add", ".")
		git("commit", "-qm", fmt.Sprintf("commit %d", c))
	}
	git("repack", "-adq")
	packs, _ := filepath.Glob(filepath.Join(ws, ".git", "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		b.Fatalf("%d packs", len(packs))
	}
	fx := importFixture{pack: packs[0], packName: filepath.Base(packs[0]), loose: map[string][]byte{}}
	// As many loose objects: a second set of files, not packed.
	for i := range 2000 {
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("d%d/g%d.txt", i%10, i)), []byte(strings.Repeat(fmt.Sprintf("loose %d\n", i), 30)), 0o644)
	}
	git("add", ".")
	git("commit", "-qm", "loose")
	dirs, _ := filepath.Glob(filepath.Join(ws, ".git", "objects", "??"))
	for _, d := range dirs {
		files, _ := os.ReadDir(d)
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(d, f.Name()))
			if err != nil {
				b.Fatal(err)
			}
			fx.loose[filepath.Base(d)+f.Name()] = data
		}
	}
	var err error
	if fx.indexV2, err = os.ReadFile(filepath.Join(ws, ".git", "index")); err != nil {
		b.Fatal(err)
	}
	git("update-index", "--index-version", "4")
	if fx.indexV4, err = os.ReadFile(filepath.Join(ws, ".git", "index")); err != nil {
		b.Fatal(err)
	}
	return fx
}

// BenchmarkImport is the cost of checking what the sandbox wrote on the
// sync path: a pack (parsed, every object resolved and hashed, its index
// written), loose objects, and an index of 4,000 entries.
func BenchmarkImport(b *testing.B) {
	fx := newImportFixture(b)
	b.Run("pack", func(b *testing.B) {
		for b.Loop() {
			s := newObjectStore(b.TempDir())
			if err := s.importPack(fx.pack, fx.packName); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("loose", func(b *testing.B) {
		for b.Loop() {
			s := newObjectStore(b.TempDir())
			for oid, data := range fx.loose {
				if err := s.importLoose(oid, data); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, ix := range []struct {
		name string
		b    []byte
	}{{"index-v2", fx.indexV2}, {"index-v4", fx.indexV4}} {
		b.Run(ix.name, func(b *testing.B) {
			for b.Loop() {
				if err := validateIndex(ix.b); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
