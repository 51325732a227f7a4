package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/orchestrator/workcopy"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/kube"
	"github.com/shiroagent/shiro/tools/copymode"
)

// copyBench measures copy mode (issue 18) on the local Docker engine and
// on the Kubernetes test cluster when SHIRO_TEST_KUBECONFIG names it:
// copying the generated tree into the sandbox's storage, and bringing 100
// files the sandbox changed back (listing its changes, fetching them,
// applying them to the workspace).
func copyBench(ctx context.Context, r *report) error {
	err := copyBenchOn(ctx, r, "the local Docker engine", func(ws string) (sandbox.Sandbox, func(), error) {
		_, sb, done, err := openSandbox(ctx, ws, func(o *docker.Options) { o.WorkspaceMode = sandbox.WorkspaceCopy })
		return sb, done, err
	})
	if err != nil || os.Getenv("SHIRO_TEST_KUBECONFIG") == "" {
		return err
	}
	return copyBenchOn(ctx, r, "Kubernetes", func(ws string) (sandbox.Sandbox, func(), error) {
		return openKube(ctx, ws)
	})
}

func copyBenchOn(ctx context.Context, r *report, where string, open func(ws string) (sandbox.Sandbox, func(), error)) error {
	g, err := newGeneratedTree(ctx, "shiro-bench-copy-")
	if err != nil {
		return err
	}
	defer g.close()
	dir, ws, root, files, listed := g.dir, g.ws, g.root, g.files, g.listed
	st, err := checkpoint.Open(filepath.Join(dir, "store"), root, g.gate, checkpoint.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	sb, done, err := open(ws)
	if err != nil {
		return err
	}
	defer done()
	r.section(fmt.Sprintf("copy mode on %s, the generated tree (%d files listed; issue 18)", where, listed))
	info := sb.Info()
	remote := &copymode.Remote{Sandbox: sb, Helper: func(context.Context) (string, error) { return info.Helper, nil }, Workspace: ws, Cache: copymode.AutoCache}
	scan, err := timeN(1, func() error { _, err := st.Current(ctx); return err })
	if err != nil {
		return err
	}
	var cp *workcopy.Copy
	in, err := timeN(1, func() error {
		var err error
		cp, _, err = workcopy.Open(ctx, workcopy.Options{Remote: remote, Store: st, Root: root, StateFile: filepath.Join(dir, "copy.json")})
		return err
	})
	if err != nil {
		return err
	}
	r.add("first scan of the workspace (every file hashed and stored)", ms(scan[0]), "", true)
	r.add("copy-in of the tree into the sandbox's volume (after that scan)", ms(in[0]), "", true)
	// The manifest's first run hashes the copy; later ones read its cache.
	if _, err := remote.Manifest(ctx, nil); err != nil {
		return err
	}
	time.Sleep(2100 * time.Millisecond) // past the cache's racy window
	if _, err := remote.Manifest(ctx, nil); err != nil {
		return err
	}
	manifest, err := timeN(5, func() error { _, err := remote.Manifest(ctx, nil); return err })
	if err != nil {
		return err
	}
	r.add("manifest of the copy (cached hashes), median of 5", ms(median(manifest)), "", true)

	var syncs []time.Duration
	for round := range 3 {
		var script strings.Builder
		for i := range 100 {
			fmt.Fprintf(&script, "echo 'round %d' >> '%s'\n", round, files[(round*100+i*7)%len(files)])
		}
		res, err := sb.Run(ctx, sandbox.Command{Shell: script.String(), Dir: ws})
		if err != nil || res.ExitCode != 0 {
			return fmt.Errorf("change 100 files in the sandbox: exit %d, %v", res.ExitCode, err)
		}
		start := time.Now()
		ch, err := cp.Changes(ctx)
		if err != nil {
			return err
		}
		applied, err := cp.Apply(ctx, ch, nil, checkpoint.Meta{Session: "bench", Turn: round + 1})
		if err != nil {
			return err
		}
		syncs = append(syncs, time.Since(start))
		if len(applied.Files) != 100 {
			var names []string
			for _, f := range applied.Files {
				names = append(names, string(f.Action)+" "+f.Path)
			}
			return fmt.Errorf("round %d applied %d files, want 100 (skipped %v): %v", round, len(applied.Files), applied.Skipped, names)
		}
	}
	s := median(syncs)
	r.add("sync-back of 100 changed files (list, fetch, apply), median of 3", ms(s), "<= 1000 ms", s <= time.Second)
	return nil
}

// openKube opens a Kubernetes sandbox for ws on the test cluster; done
// closes it and removes its pod and claim.
func openKube(ctx context.Context, ws string) (sandbox.Sandbox, func(), error) {
	bin := os.Getenv("SHIRO_BIN")
	state, err := os.MkdirTemp("", "shiro-bench-kube-state-")
	if err != nil {
		return nil, nil, err
	}
	c, err := kube.Connect(ctx, kube.ConnectOptions{Kubeconfig: os.Getenv("SHIRO_TEST_KUBECONFIG"), StateDir: state})
	if err != nil {
		os.RemoveAll(state)
		return nil, nil, err
	}
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 1001, 1001
	}
	sb, err := c.Open(ctx, kube.Options{Spec: sandbox.Spec{Workspace: ws, HelperBinary: bin + "-helper", UID: uid, GID: gid, Settings: sandbox.Settings{Memory: 1 << 30, CPUs: 1, Network: sandbox.NetworkNone}}})
	if err != nil {
		os.RemoveAll(state)
		return nil, nil, err
	}
	return sb, func() {
		sb.Close()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		_ = c.Remove(cctx, sb.Pod())
		_, _ = c.RemoveClaims(cctx, ws)
		os.RemoveAll(state)
	}, nil
}
