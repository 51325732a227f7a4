package tools

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"testing"
	"time"
)

func TestScratchList(t *testing.T) {
	dir := "/tmp/gtree"
	root, _ := os.OpenRoot(dir)
	var b []byte
	Walk(t.Context(), root, WalkOptions{}, func(p string, m fs.FileMode) error {
		if m&fs.ModeSymlink == 0 {
			b = append(b, p...)
			b = append(b, 0)
		}
		return nil
	})
	os.WriteFile("/tmp/gtree-files.nul", b, 0o644)
	fmt.Println(len(b))
}

type gstate struct {
	reach bool
	rules []ignoreRule
}

func TestScratchReach(t *testing.T) {
	dir := "/tmp/gtree"
	root, _ := os.OpenRoot(dir)
	for range 3 {
		start := time.Now()
		rootRules, _ := ancestorRules(root, "")
		memo := map[string]*gstate{}
		var get func(d string) *gstate
		get = func(d string) *gstate {
			if s, ok := memo[d]; ok {
				return s
			}
			var s gstate
			if d == "" {
				s = gstate{reach: true, rules: rootRules}
			} else {
				p := get(parentDir(d))
				s.reach = p.reach && !ignored(p.rules, d, path.Base(d), true)
				s.rules = p.rules
			}
			if s.reach {
				if data, err := os.ReadFile(dir + "/" + d + "/.gitignore"); err == nil {
					s.rules = parseIgnore(data, d, s.rules[:len(s.rules):len(s.rules)])
				}
			}
			memo[d] = &s
			return &s
		}
		n, by := 0, 0
		last := "\x00"
		var cur *gstate
		Walk(t.Context(), root, WalkOptions{}, func(p string, m fs.FileMode) error {
			n++
			if d := parentDir(p); d != last {
				last = d
				cur = get(d)
			}
			if !cur.reach || ignored(cur.rules, p, path.Base(p), false) {
				by++
			}
			return nil
		})
		fmt.Println("reach", time.Since(start), n, "byname", by, "dirs", len(memo))
	}
}
