// Package workspace is the directory a run works on, opened once: its
// os.Root (every host-side read of it), the write gate built from that
// same descriptor (every host-side write, decision 30), and its identity as
// an object rather than a path. Whatever happens to the path after Open (a
// rename, a symlink or another directory put in its place), reads, writes
// and the identity stay those of the directory that was opened.
package workspace

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/shiroagent/shiro/internal/hostwrite"
)

// Workspace is one open of the workspace directory. Make it once per run
// with Open, hand it to every reader and writer, and Close it when the
// last of them is done. It is safe for concurrent use.
type Workspace struct {
	path string
	root *os.Root
	gate *hostwrite.Gate

	idOnce sync.Once
	id     string
	idErr  error
}

// Open opens the workspace directory dir: one os.Root of it, and the
// write gate on the same directory.
func Open(dir string) (*Workspace, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open the workspace: %w", err)
	}
	gate, err := hostwrite.New(root, dir)
	if err != nil {
		root.Close()
		return nil, err
	}
	return &Workspace{path: dir, root: root, gate: gate}, nil
}

// Path is the workspace's path as Open was given it (the path to show and
// to name it by; it is not opened again).
func (w *Workspace) Path() string { return w.path }

// Root is the workspace directory, held open: every host-side read goes
// through it.
func (w *Workspace) Root() *os.Root { return w.root }

// Gate is the one way shiro writes into the workspace on the host.
func (w *Workspace) Gate() *hostwrite.Gate { return w.gate }

// ID names the directory that was opened as an object, not a path (see
// FileID), computed once from the open descriptor.
func (w *Workspace) ID() (string, error) {
	w.idOnce.Do(func() {
		f, err := w.root.Open(".")
		if err != nil {
			w.idErr = fmt.Errorf("stat the workspace %s: %w", w.path, err)
			return
		}
		defer f.Close()
		w.id, w.idErr = FileID(f, w.path)
	})
	return w.id, w.idErr
}

// Close closes the gate and the root.
func (w *Workspace) Close() error {
	return errors.Join(w.gate.Close(), w.root.Close())
}
