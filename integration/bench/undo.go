package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/internal/treegen"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/tools"
)

// undoBench measures checkpoints on the generated tree of 100,000 files:
// the first one (every file hashed and stored), one after 10 files
// changed (inotify names them; without it the stat index recognises the
// rest on a walk), and an undo of 1,000 changed files; the walker over the
// same tree is the baseline.
func undoBench(ctx context.Context, r *report) error {
	g, err := newGeneratedTree(ctx, "shiro-bench-undo-")
	if err != nil {
		return err
	}
	defer g.close()
	dir, ws, root, files := g.dir, g.ws, g.root, g.files
	if len(files) < 1100 {
		return fmt.Errorf("the generated tree lists only %d files", len(files))
	}
	st, err := checkpoint.Open(filepath.Join(dir, "store"), root, g.gate, checkpoint.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	r.section(fmt.Sprintf("undo checkpoints on the generated tree (%d files listed; issue 14)", len(files)))

	turn := 0
	record := func(kind checkpoint.Kind) (checkpoint.Checkpoint, error) {
		if kind == checkpoint.KindTurn {
			turn++
		}
		return st.Record(ctx, checkpoint.Meta{Session: "bench", Turn: turn, Kind: kind})
	}
	first, err := timeN(1, func() error { _, err := record(checkpoint.KindTurn); return err })
	if err != nil {
		return err
	}
	r.add("first checkpoint (every file hashed and stored)", ms(first[0]), "", true)
	// Files written by the generator a moment ago are too fresh for the
	// stat index to trust (a write in the same clock tick would keep the
	// mtime); a second checkpoint settles them, as the next turn would.
	time.Sleep(50 * time.Millisecond)
	if _, err := record(checkpoint.KindTurn); err != nil {
		return err
	}

	change := func(from, n, round int) error {
		for i := from; i < from+n; i++ {
			p := filepath.Join(ws, files[i%len(files)])
			if err := os.WriteFile(p, fmt.Appendf(nil, "changed in round %d\n", round), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	var tenChanged []time.Duration
	for round := range 9 {
		if err := change(round*10, 10, round); err != nil {
			return err
		}
		time.Sleep(30 * time.Millisecond) // past the racy window, as between two tool calls
		d, err := timeN(1, func() error { _, err := record(checkpoint.KindCall); return err })
		if err != nil {
			return err
		}
		tenChanged = append(tenChanged, d...)
	}
	walk, err := timeN(9, func() error {
		return tools.Walk(ctx, root, tools.WalkOptions{}, func(string, fs.FileMode) error { return nil })
	})
	if err != nil {
		return err
	}
	cr := float64(median(tenChanged)) / float64(median(walk))
	r.add("checkpoint after 10 files changed, median of 9", ms(median(tenChanged)), "<= 150 ms", median(tenChanged) <= 150*time.Millisecond)
	r.add("walker over the same tree, median of 9 (baseline)", ms(median(walk)), "", true)
	r.add("checkpoint / walker", fmt.Sprintf("%.2fx", cr), "", true)

	var undo, write []time.Duration
	for round := range 3 {
		before, err := record(checkpoint.KindTurn)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := change(1000*round, 1000, 100+round); err != nil {
			return err
		}
		write = append(write, time.Since(start))
		end, err := record(checkpoint.KindEnd)
		if err != nil {
			return err
		}
		start = time.Now()
		plan, err := st.Plan(ctx, before, &end)
		if err != nil {
			return err
		}
		done, err := st.Apply(ctx, plan, nil)
		if err != nil {
			return err
		}
		undo = append(undo, time.Since(start))
		if len(done) != 1000 {
			return fmt.Errorf("the undo restored %d files, want 1000", len(done))
		}
	}
	r.add("undo of 1,000 changed files (plan and restore), median of 3", ms(median(undo)), "<= 1000 ms", median(undo) <= time.Second)
	r.add("writing those 1,000 files with os.WriteFile (baseline)", ms(median(write)), "", true)
	r.add("undo / writing", fmt.Sprintf("%.2fx", float64(median(undo))/float64(median(write))), "", true)
	return nil
}

// generatedTree is the 100,000-file generated tree in a temporary
// directory (dir/ws), opened, with the files the walker lists (listed)
// and, of those, the regular files a test may rewrite (files: no ignore
// file, whose change would change what is listed, and no name a shell
// would need quoted).
type generatedTree struct {
	dir, ws string
	opened  *workspace.Workspace
	root    *os.Root
	gate    *hostwrite.Gate
	files   []string
	listed  int
}

func newGeneratedTree(ctx context.Context, prefix string) (*generatedTree, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	g := &generatedTree{dir: dir, ws: filepath.Join(dir, "ws")}
	fail := func(err error) (*generatedTree, error) { g.close(); return nil, err }
	if err := os.Mkdir(g.ws, 0o755); err != nil {
		return fail(err)
	}
	if err := treegen.Generate(g.ws, 100_000, 1); err != nil {
		return fail(err)
	}
	if g.opened, err = workspace.Open(g.ws); err != nil {
		return fail(err)
	}
	g.root, g.gate = g.opened.Root(), g.opened.Gate()
	err = tools.Walk(ctx, g.root, tools.WalkOptions{}, func(p string, mode fs.FileMode) error {
		g.listed++
		if base := filepath.Base(p); mode.IsRegular() && base != ".gitignore" && base != ".shiroignore" && !strings.ContainsAny(p, " '\\\"$`") {
			g.files = append(g.files, p)
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return g, nil
}

func (g *generatedTree) close() {
	if g.opened != nil {
		g.opened.Close()
	}
	os.RemoveAll(g.dir)
}
