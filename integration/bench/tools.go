package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/internal/treegen"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/tools"
)

// toolsBench measures the walker, grep and read_many_files on a generated
// tree of 100,000 files with nested ignore files, each against a baseline
// from the same run.
func toolsBench(ctx context.Context, r *report) error {
	dir, err := os.MkdirTemp("", "shiro-bench-tree-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := treegen.Generate(dir, 100_000, 1); err != nil {
		return err
	}
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("git init: %v: %s", err, out)
	}
	// Every file in the index, as in a real checkout: the walker reads it
	// (tracked files are listed whatever the rules say) and so does git.
	if out, err := exec.Command("git", "-C", dir, "add", "-A").CombinedOutput(); err != nil {
		return fmt.Errorf("git add: %v: %s", err, out)
	}
	w, err := workspace.Open(dir)
	if err != nil {
		return err
	}
	defer w.Close()
	root := w.Root()
	r.section("tools on a generated tree of 100,000 files (issue 3)")

	// Walker against git ls-files.
	var listed int
	walk, err := timeN(5, func() error {
		listed = 0
		return tools.Walk(ctx, root, tools.WalkOptions{}, func(string, fs.FileMode) error { listed++; return nil })
	})
	if err != nil {
		return err
	}
	var gitListed int
	git, err := timeN(5, func() error {
		cmd := exec.Command("git", "ls-files", "-co", "--exclude-standard")
		cmd.Dir = dir
		out, err := cmd.Output()
		gitListed = bytes.Count(out, []byte("\n"))
		return err
	})
	if err != nil {
		return err
	}
	wr := float64(median(walk)) / float64(median(git))
	r.add(fmt.Sprintf("walker, median of 5 (%d files)", listed), ms(median(walk)), "", true)
	r.add(fmt.Sprintf("git ls-files -co --exclude-standard (%d files)", gitListed), ms(median(git)), "", true)
	r.add("walker / git ls-files, index read", fmt.Sprintf("%.2fx", wr), "<= 1.0x", wr <= 1.0)

	// grep through the tool against rg run directly in the same container.
	bin := os.Getenv("SHIRO_BIN")
	eng, err := docker.Connect(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	defer removeContainers(eng.API(), dir)
	sb, err := eng.Open(ctx, docker.Reference(images.Tag()), docker.Options{Spec: sandbox.Spec{Workspace: dir, HelperBinary: bin + "-helper"}})
	if err != nil {
		return err
	}
	defer sb.Close()
	env := &tools.Env{Workspace: dir, Root: root, Sandbox: sb}
	grep := tools.NewGrep()
	// README and main\.go match more than 200 lines; zqxj matches none, so
	// every file is searched.
	for _, pattern := range []string{"README", `main\.go`, "zqxj"} {
		input, _ := json.Marshal(map[string]string{"pattern": pattern})
		var hits int
		runTool := func() error {
			res, err := grep.Run(ctx, env, input)
			if err != nil {
				return err
			}
			if res.IsError {
				return fmt.Errorf("grep %s: %s", pattern, res.Text)
			}
			hits = strings.Count(res.Text, "\n") + 1
			return nil
		}
		runRG := func() error {
			_, err := sb.Run(ctx, sandbox.Command{Args: []string{"rg", "--line-number", "--no-heading", "--color", "never",
				"--no-require-git", "--max-count", "200", "--regexp", pattern, "."}, Dir: dir})
			return err
		}
		// Warm both, then alternate, so load on the machine hits both alike.
		if err := errors.Join(runTool(), runRG()); err != nil {
			return err
		}
		var viaTool, direct []time.Duration
		for range 9 {
			t, err := timeN(1, runTool)
			if err != nil {
				return err
			}
			d, err := timeN(1, runRG)
			if err != nil {
				return err
			}
			viaTool, direct = append(viaTool, t...), append(direct, d...)
		}
		gr := float64(median(viaTool)) / float64(median(direct))
		r.add(fmt.Sprintf("grep %q through the tool, median of 9, alternating with rg (%d lines)", pattern, hits), ms(median(viaTool)), "", true)
		r.add(fmt.Sprintf("rg %q directly in the same container", pattern), ms(median(direct)), "", true)
		target, ok := "<= 1.2x", gr <= 1.2 // issue 16
		if pattern == "zqxj" {
			target, ok = "", true // shown; issue 16 set no target for it
		}
		r.add("grep tool / rg", fmt.Sprintf("%.2fx", gr), target, ok)
	}

	// read_many_files of 20 files against 20 sequential read_file calls.
	var files []string
	_ = tools.Walk(ctx, root, tools.WalkOptions{Limit: 20}, func(p string, _ fs.FileMode) error {
		files = append(files, p)
		return nil
	})
	many := tools.NewReadManyFiles()
	one := tools.NewReadFile()
	batch := make([]map[string]string, len(files))
	for i, f := range files {
		batch[i] = map[string]string{"path": f}
	}
	manyInput, _ := json.Marshal(map[string]any{"files": batch})
	concurrent, err := timeN(200, func() error {
		_, err := many.Run(ctx, env, manyInput)
		return err
	})
	if err != nil {
		return err
	}
	sequential, err := timeN(200, func() error {
		for _, f := range files {
			in, _ := json.Marshal(map[string]string{"path": filepath.ToSlash(f)})
			if _, err := one.Run(ctx, env, in); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.add("read_many_files of 20 files, median of 200", ms(median(concurrent)), "", true)
	r.add("20 sequential read_file calls, median of 200", ms(median(sequential)), "", true)
	r.add("read_many_files / sequential", fmt.Sprintf("%.2fx", float64(median(concurrent))/float64(median(sequential))), "", true)
	return nil
}
