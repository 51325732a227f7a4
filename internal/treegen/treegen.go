// Package treegen generates file trees with nested ignore files for the
// walker's conformance tests and benchmarks. The same seed always yields the
// same tree.
package treegen

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

var dirNames = []string{
	"src", "lib", "pkg", "internal", "cmd", "build", "dist", "out", "target",
	"vendor", "docs", "test", "tests", "tmp", "cache", "gen", "assets", "a", "b",
	"c", "deep", "logs", "keep", "node_modules", ".hidden", "x y", "Build",
}

var fileNames = []string{
	"main.go", "util.go", "index.ts", "app.js", "README.md", "notes.txt",
	"debug.log", "error.log", "keep.log", "data.json", "a.o", "b.o",
	"important.o", "x.tmp", ".env", "config.yaml", "Makefile", "my file.txt",
	"#hash.txt", "!bang.txt", "[x].txt", "ünï.txt", "a", "b", "build", "keep",
	"trailing ", "q.go", "ab.go", "bb.go", "t.txt", "Main.GO",
}

// fixedRules are rules a hand would write; Rule mixes them with generated ones.
var fixedRules = []string{
	"*.log", "!keep.log", "*.o", "!important.o", "*.tmp", "build/", "/dist",
	"dist/", "out", "/cache/", "tmp/", "**/gen", "**/logs/*.log", "docs/**/*.md",
	"src/**/test", "a/**/b/", "**/*.json", "lib/**", "src/*.go", "/src/a",
	"test*/", "?.o", "[ab].go", "[!a]*.txt", "*.[ot]*", "!src/", "!build/keep/",
	"!*.md", "# a comment", "", "   ", `\#hash.txt`, `\!bang.txt`, `\[x\].txt`,
	"trailing   ", `trailing\ `, "deep/**/t.txt", "*/*.md", "/*.txt", "a**b",
	"[[:upper:]]*", "**/keep/**", "!**/keep", ".*", "!.gitignore", "x y/",
	"b/*/", "**/", "*.GO", "ünï.txt", "!/out", "c/**/", "[a-c]", "*.go\r",
}

// Rule returns one random ignore rule.
func Rule(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return fixedRules[r.IntN(len(fixedRules))]
	}
	pick := func(names []string) string { return names[r.IntN(len(names))] }
	var b strings.Builder
	if r.IntN(4) == 0 {
		b.WriteString("!")
	}
	if r.IntN(4) == 0 {
		b.WriteString("/")
	}
	if r.IntN(6) == 0 {
		b.WriteString("**/")
	}
	for range r.IntN(2) {
		b.WriteString(pick(dirNames))
		b.WriteString("/")
		if r.IntN(5) == 0 {
			b.WriteString("**/")
		}
	}
	if r.IntN(3) == 0 {
		b.WriteString(pick(dirNames))
	} else {
		name := pick(fileNames)
		switch r.IntN(4) {
		case 0:
			if i := strings.LastIndexByte(name, '.'); i > 0 {
				name = "*" + name[i:]
			}
		case 1:
			name = name[:len(name)/2] + "*"
		}
		b.WriteString(name)
	}
	if r.IntN(4) == 0 {
		b.WriteString("/")
	}
	if r.IntN(8) == 0 {
		b.WriteString("/**")
	}
	return b.String()
}

// Rules returns n random rules as the text of an ignore file.
func Rules(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(Rule(r))
		b.WriteString("\n")
	}
	return b.String()
}

// Generate creates about files files under dir (which must exist) in nested
// directories, with a .gitignore in the root and in about one directory in
// six, and a .shiroignore in about one in twelve. It writes no .git
// directory.
func Generate(dir string, files int, seed int64) error {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x5eed))
	root := &node{path: dir, names: map[string]bool{}}
	dirs := []*node{root}
	mk := func(parent *node, name string) (string, bool) {
		if parent.names[name] {
			return "", false
		}
		parent.names[name] = true
		return filepath.Join(parent.path, name), true
	}
	if err := writeIgnore(r, root, ".gitignore"); err != nil {
		return err
	}
	for made := 0; made < files; {
		// Prefer recent directories so the tree grows deep as well as wide.
		i := len(dirs) - 1 - r.IntN(min(len(dirs), 8))
		if r.IntN(4) == 0 {
			i = r.IntN(len(dirs))
		}
		parent := dirs[i]
		if parent.depth < 7 && r.IntN(6) == 0 {
			p, ok := mk(parent, dirNames[r.IntN(len(dirNames))])
			if !ok {
				continue
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				return fmt.Errorf("treegen: %w", err)
			}
			d := &node{path: p, depth: parent.depth + 1, names: map[string]bool{}}
			dirs = append(dirs, d)
			if r.IntN(6) == 0 {
				if err := writeIgnore(r, d, ".gitignore"); err != nil {
					return err
				}
			}
			if r.IntN(12) == 0 {
				if err := writeIgnore(r, d, ".shiroignore"); err != nil {
					return err
				}
			}
			continue
		}
		name := fileNames[r.IntN(len(fileNames))]
		if r.IntN(3) == 0 {
			name = fmt.Sprintf("f%d_%s", made, name)
		}
		p, ok := mk(parent, name)
		if !ok {
			continue
		}
		if err := os.WriteFile(p, []byte(name+"\n"), 0o644); err != nil {
			return fmt.Errorf("treegen: %w", err)
		}
		made++
	}
	return nil
}

type node struct {
	path  string
	depth int
	names map[string]bool
}

func writeIgnore(r *rand.Rand, n *node, name string) error {
	n.names[name] = true
	if err := os.WriteFile(filepath.Join(n.path, name), []byte(Rules(r, 1+r.IntN(5))), 0o644); err != nil {
		return fmt.Errorf("treegen: %w", err)
	}
	return nil
}
