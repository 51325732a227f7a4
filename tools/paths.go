package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/internal/hostwrite"
)

// errEscapes marks a path that leaves the workspace.
var errEscapes = errors.New("path escapes workspace")

// resolvePath maps a model-supplied path (relative to the workspace, or
// absolute) to the slash-separated workspace-relative form env.Root takes:
// "." for the root. Resolve-then-compare catches "a/../../x"; an absolute
// path is accepted only inside the workspace. Symlinks are left to os.Root.
func resolvePath(env *Env, p string) (string, error) {
	var rel string
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(filepath.Clean(env.Workspace), filepath.Clean(p))
		if err != nil {
			return "", errEscapes
		}
		rel = r
	} else {
		rel = filepath.Clean(p)
	}
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", errEscapes
	}
	return filepath.ToSlash(rel), nil
}

// openDir opens the directory rel through root without blocking: a FIFO
// put in the directory's place opens at once, and reading it as a
// directory fails.
func openDir(root *os.Root, rel string) (*os.File, error) {
	return root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// readRegular reads the regular file rel through root. Anything else (a
// FIFO, which would block the read; a directory) is an error matching
// confine.ErrNotRegular.
func readRegular(root *os.Root, rel string) ([]byte, error) {
	f, err := confine.OpenRegular(root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	return data, nil
}

// isEscape reports whether err is os.Root refusing a path that leaves it
// (through "..", or a symlink pointing outside or at an absolute path).
// os does not export that error; Root.Open("..") produces it without a
// system call.
func isEscape(root *os.Root, err error) bool {
	if errors.Is(err, errEscapes) {
		return true
	}
	_, probe := root.Open("..")
	var want *os.PathError
	return errors.As(probe, &want) && errors.Is(err, want.Err)
}

// fileProblem turns the error of an operation on the model's path p into
// the message the model reads.
func fileProblem(root *os.Root, p string, err error) string {
	switch {
	case isEscape(root, err):
		return "Path escapes workspace: " + p
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return "No such file: " + p
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Sprintf("Cannot access %s: %v", p, err)
}

// writeProblem is fileProblem for a failed write. A refusal of the write
// gate says what and why; one whose directory leads out of the workspace
// is an escape, as os.Root would have said.
func writeProblem(env *Env, p string, err error) string {
	if isEscape(env.Root, err) {
		return "Path escapes workspace: " + p
	}
	var refusal *hostwrite.Refusal
	if errors.As(err, &refusal) {
		if _, serr := env.Root.Stat(path.Dir(refusal.Path)); serr != nil && isEscape(env.Root, serr) {
			return "Path escapes workspace: " + p
		}
		if rel, rerr := resolvePath(env, p); rerr == nil && rel != refusal.Path {
			return fmt.Sprintf("Cannot write %s (it leads to %s): %s", p, refusal.Path, refusal.Reason)
		}
		return fmt.Sprintf("Cannot write %s: %s", p, refusal.Reason)
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Sprintf("Cannot write %s: %v", p, err)
}

// realTarget follows symlinks in the last element of rel (inside the
// workspace only) so that a write replaces the file a link points at, not
// the link.
func realTarget(root *os.Root, rel string) (string, error) {
	for range 40 {
		fi, err := root.Lstat(rel)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return rel, nil
		}
		link, err := root.Readlink(rel)
		if err != nil {
			return "", err
		}
		if path.IsAbs(link) {
			return "", errEscapes
		}
		rel = path.Join(path.Dir(rel), link)
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "", errEscapes
		}
	}
	return "", syscall.ELOOP
}

// errNoGate is the write of an Env without a write gate.
var errNoGate = errors.New("no write gate for this workspace")

// writeAtomic replaces rel with data through the workspace's write gate:
// atomically (a temporary file beside it, synced and renamed over it), an
// existing file keeping its permission bits, a new one 0644 less the
// umask, missing parent directories made. A symlink as the last element
// is followed inside the workspace (realTarget), and the path it leads to
// passes the gate like any other: no symlinked directory on the way, not
// into a git directory.
func writeAtomic(env *Env, rel string, data []byte) error {
	if env.Gate == nil {
		return errNoGate
	}
	target, err := realTarget(env.Root, rel)
	if err != nil {
		return err
	}
	return env.Gate.WriteFile(target, data)
}
