//go:build !unix

package hostwrite

import (
	"errors"
	"io/fs"
	"os"
)

// errUnsupported is every write's error where the gate has no system
// calls to walk with.
var errUnsupported = errors.New("shiro writes into the workspace only on Unix systems (the write gate needs openat)")

// Gate is the one way shiro writes into a workspace; on this system every
// write fails.
type Gate struct{ ws string }

// Dir is a directory of the workspace that passed the gate.
type Dir struct{}

// Op is one operation of a batch that Check looks at.
type Op struct {
	Path   string
	Remove bool
}

// New makes the gate of the workspace at ws.
func New(_ *os.Root, ws string) (*Gate, error) { return &Gate{ws: ws}, nil }

// Open makes the gate of the workspace directory at ws.
func Open(ws string) (*Gate, error) { return &Gate{ws: ws}, nil }

func (g *Gate) Close() error                                { return nil }
func (g *Gate) Workspace() string                           { return g.ws }
func (g *Gate) Protect(string) error                        { return nil }
func (g *Gate) OpenDir(string) (*Dir, error)                { return nil, errUnsupported }
func (g *Gate) MkdirAll(string) (*Dir, error)               { return nil, errUnsupported }
func (g *Gate) WriteFile(string, []byte) error              { return errUnsupported }
func (g *Gate) Remove(string) error                         { return errUnsupported }
func (g *Gate) RemoveEmptyDir(string) error                 { return errUnsupported }
func (g *Gate) ReplaceWithSymlink(string, string) error     { return errUnsupported }
func (g *Gate) Check([]Op) error                            { return errUnsupported }
func (d *Dir) Path() string                                 { return "" }
func (d *Dir) Close() error                                 { return nil }
func (d *Dir) Sync() error                                  { return errUnsupported }
func (d *Dir) Lstat(string) (fs.FileMode, error)            { return 0, errUnsupported }
func (d *Dir) Create(string, fs.FileMode) (*os.File, error) { return nil, errUnsupported }
func (d *Dir) Symlink(string, string) error                 { return errUnsupported }
func (d *Dir) Replace(string, string) error                 { return errUnsupported }
func (d *Dir) Remove(string) error                          { return errUnsupported }
func (d *Dir) RemoveEmptyDir(string) error                  { return errUnsupported }

// TempName is a temporary name beside base.
func TempName(base, suffix string) string { return "." + base + suffix }
