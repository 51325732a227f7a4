// Package confine reads the files of a directory tree that shiro reads on
// the host but does not trust: the workspace, the repository around it, a
// build context. Every path is resolved through an os.Root, so a symlink is
// followed only while it stays inside the tree; only regular files are
// read, and they are opened without blocking, so that a FIFO cannot stall
// the reader. A file that is not read comes back as a *Refusal that names
// it and says why, ready to be shown as a notice.
package confine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/shiroagent/shiro/internal/termsafe"
)

// ErrNotRegular is matched (errors.Is) by the error for a file that is not a
// regular file.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError is a path that names something other than a regular
// file: a directory, a FIFO, a device, a socket.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: not a regular file (%s)", e.Path, Kind(e.Mode))
}

// Is makes errors.Is(err, ErrNotRegular) hold.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// Kind names what a file of mode is: "a directory", "a FIFO", …
func Kind(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "a regular file"
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeSymlink != 0:
		return "a symlink"
	case mode&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// OpenRegular opens name, a path relative to root, for reading when it is
// a regular file. The file is opened with O_NONBLOCK (a FIFO opens at once
// instead of waiting for a writer) and checked on the open descriptor, so
// a file swapped for something else between a check and the open is
// caught. Errors of the open are root's, unchanged (a missing file, a path
// that leaves root); a file that is not regular gives a *NotRegularError.
//
// A device node is opened before it is refused; the sandbox cannot create
// one (it holds no capabilities), and git does not store them.
func OpenRegular(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Path: name, Mode: fi.Mode().Type()}
	}
	return f, nil
}

// IsEscape reports whether err is root refusing a path that leaves it
// (through "..", or a symlink that points outside or at an absolute path).
// os does not export that error; Root.Open("..") produces it without a
// system call.
func IsEscape(root *os.Root, err error) bool {
	if err == nil {
		return false
	}
	_, probe := root.Open("..")
	var want *os.PathError
	return errors.As(probe, &want) && errors.Is(err, want.Err)
}

// Tree is a directory tree read through an os.Root.
type Tree struct {
	Root *os.Root
	// Name is what messages call the tree, with its article: "the
	// workspace", "the repository".
	Name string
}

// Open opens dir as a Tree called name, for a directory that is not the
// workspace: the repository around it, a directory above it, a build
// context of the user's outside it. The workspace itself is read through
// the run's one open of it (internal/workspace). The caller closes the
// Tree's Root.
func Open(dir, name string) (Tree, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Tree{}, err
	}
	return Tree{Root: root, Name: name}, nil
}

// Refusal is a file of a Tree that was not read, and why.
type Refusal struct {
	// Path is the file as the caller named it.
	Path string
	// Reason completes "<Path> is …": "a symlink that leaves the
	// workspace", "a FIFO", "a directory".
	Reason string
}

// Error names the file quoted when its name holds what a terminal would
// not show as it is (the workspace chose it).
func (r *Refusal) Error() string { return termsafe.Name(r.Path) + " is " + r.Reason + "; not read" }

// AsRefusal returns the *Refusal in err's chain, if there is one.
func AsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

// Open opens the regular file name (slash-separated, relative to the
// tree). A missing file gives an error that matches fs.ErrNotExist; a path
// that leaves the tree, a symlink loop or a file that is not regular gives
// a *Refusal.
func (t Tree) Open(name string) (*os.File, error) {
	f, err := OpenRegular(t.Root, name)
	if err != nil {
		return nil, t.refusal(name, err)
	}
	return f, nil
}

// ReadFile reads the regular file name (see Open), at most limit bytes of
// it: a longer file is cut, and the caller decides what a cut means.
func (t Tree) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := t.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// ReadDir lists the directory name (see Open for the errors; "." is the
// tree's top), sorted by name.
func (t Tree) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := t.openDir(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// OpenRoot opens the directory name as a root of its own (a build context
// inside the workspace), refusing what Open refuses and anything that is
// not a directory.
//
// os.Root.OpenRoot takes no flags, so the check is a stat before the open:
// a FIFO swapped in between would block it. Only the sandbox can make that
// swap, and it gains nothing but a stalled start (the third ctrl-c
// exits).
func (t Tree) OpenRoot(name string) (*os.Root, error) {
	fi, err := t.Root.Stat(name)
	if err != nil {
		return nil, t.refusal(name, err)
	}
	if !fi.IsDir() {
		return nil, &Refusal{Path: name, Reason: Kind(fi.Mode()) + ", not a directory"}
	}
	r, err := t.Root.OpenRoot(name)
	if err != nil {
		return nil, t.refusal(name, err)
	}
	return r, nil
}

// openDir opens the directory name without blocking on whatever else it
// may turn out to be.
func (t Tree) openDir(name string) (*os.File, error) {
	f, err := t.Root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, t.refusal(name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.IsDir() {
		f.Close()
		return nil, &Refusal{Path: name, Reason: Kind(fi.Mode()) + ", not a directory"}
	}
	return f, nil
}

// refusal turns an error of reading name into a *Refusal when it is one
// (the path leaves the tree, loops, or is not a regular file); other
// errors are returned as they are.
func (t Tree) refusal(name string, err error) error {
	var nr *NotRegularError
	switch {
	case errors.As(err, &nr):
		return &Refusal{Path: name, Reason: Kind(nr.Mode)}
	case errors.Is(err, syscall.ELOOP):
		return &Refusal{Path: name, Reason: "a symlink loop"}
	case IsEscape(t.Root, err):
		return &Refusal{Path: name, Reason: t.escapeReason(name)}
	}
	return err
}

// escapeReason says how name leaves the tree: it is a symlink whose target
// is outside (or absolute, which os.Root never follows), or a directory on
// its way is.
func (t Tree) escapeReason(name string) string {
	fi, err := t.Root.Lstat(name)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return "behind a symlink that leaves " + t.Name
	}
	link, err := t.Root.Readlink(name)
	if err == nil && filepath.IsAbs(link) {
		top := filepath.Clean(t.Root.Name())
		if rel, err := filepath.Rel(top, filepath.Clean(link)); err == nil && filepath.IsLocal(rel) {
			return "an absolute symlink (only relative links that stay inside " + t.Name + " are followed)"
		}
	}
	return "a symlink that leaves " + t.Name
}

// FS is the directory dir of the tree as an fs.FS, with the tree's rules:
// its Open, ReadFile and ReadDir return a *Refusal (wrapped in an
// *fs.PathError by Open) for what Tree refuses. ReadFile is capped at
// limit bytes.
func (t Tree) FS(dir string, limit int64) fs.FS {
	return treeFS{t: t, dir: dir, limit: limit}
}

type treeFS struct {
	t     Tree
	dir   string
	limit int64
}

func (f treeFS) path(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return f.dir, nil
	}
	if f.dir == "." || f.dir == "" {
		return name, nil
	}
	return f.dir + "/" + name, nil
}

func (f treeFS) Open(name string) (fs.File, error) {
	p, err := f.path("open", name)
	if err != nil {
		return nil, err
	}
	// A directory or a regular file; nothing else is opened.
	file, err := f.t.Root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: f.t.refusal(p, err)}
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		file.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: &Refusal{Path: p, Reason: Kind(fi.Mode())}}
	}
	return file, nil
}

func (f treeFS) ReadFile(name string) ([]byte, error) {
	p, err := f.path("read", name)
	if err != nil {
		return nil, err
	}
	return f.t.ReadFile(p, f.limit)
}

func (f treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := f.path("readdir", name)
	if err != nil {
		return nil, err
	}
	return f.t.ReadDir(p)
}
