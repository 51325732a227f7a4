package tools

import (
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestScratchWalk(t *testing.T) {
	dir := os.Getenv("SCRATCH_DIR")
	if dir == "" {
		t.Skip()
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, fast := range []bool{true, true, false} {
		var got []string
		st := time.Now()
		err = walk(t.Context(), root, WalkOptions{}, func(p string, _ fs.FileMode) error { got = append(got, p); return nil }, fast)
		t.Log(fast, len(got), time.Since(st), err)
		if !fast {
			slices.Sort(got)
			st = time.Now()
			out, _ := exec.Command("git", "-C", dir, "ls-files", "-z", "-co", "--exclude-standard").Output()
			t.Log("git", time.Since(st))
			var want []string
			for _, p := range strings.Split(string(out), "\x00") {
				if p != "" && !strings.Contains("/"+p+"/", "/node_modules/") {
					want = append(want, p)
				}
			}
			slices.Sort(want)
			t.Log(len(want))
			n := 0
			for _, p := range want {
				if _, ok := slices.BinarySearch(got, p); !ok && n < 20 {
					t.Log("missing", p)
					n++
				}
			}
			for _, p := range got {
				if _, ok := slices.BinarySearch(want, p); !ok && n < 40 {
					t.Log("extra", p)
					n++
				}
			}
		}
	}
}
