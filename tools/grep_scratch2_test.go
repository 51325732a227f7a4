package tools

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
)

func TestScratchBench(t *testing.T) {
	dir := "/tmp/gtree"
	ctx := t.Context()
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sb, err := eng.Open(ctx, docker.Options{Workspace: dir, Image: images.Tag(), HelperBinary: "/tmp/shiro-grep"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	root, _ := os.OpenRoot(dir)
	env := &Env{Workspace: dir, Root: root, Sandbox: sb}
	grep := NewGrep()
	n, _ := strconv.Atoi(os.Getenv("N"))
	if n == 0 {
		n = 15
	}
	med := func(d []float64) float64 { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
	for _, pattern := range []string{"README", `main\.go`} {
		input, _ := json.Marshal(map[string]string{"pattern": pattern})
		var tool, rg, ratio []float64
		for range n {
			s := time.Now()
			res, err := grep.Run(ctx, env, input)
			if err != nil || res.IsError {
				t.Fatal(err, res.Text)
			}
			a := float64(time.Since(s).Microseconds()) / 1000
			s = time.Now()
			if _, err := sb.Run(ctx, sandbox.Command{Args: []string{"rg", "--line-number", "--no-heading", "--color", "never",
				"--no-require-git", "--max-count", "200", "--regexp", pattern, "."}, Dir: dir}); err != nil {
				t.Fatal(err)
			}
			b := float64(time.Since(s).Microseconds()) / 1000
			tool, rg, ratio = append(tool, a), append(rg, b), append(ratio, a/b)
		}
		fmt.Printf("%-10s tool %7.1f  rg %7.1f  ratio-of-medians %.2f  median-ratio %.2f\n", pattern, med(tool), med(rg), med(tool)/med(rg), med(ratio))
	}
}
