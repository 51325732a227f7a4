package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/shiroagent/shiro/internal/confine"
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

// writeProblem is fileProblem for a failed write.
func writeProblem(env *Env, p string, err error) string {
	if isEscape(env.Root, err) {
		return "Path escapes workspace: " + p
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

// writeAtomic replaces rel (through root) with data: a temporary file in
// the same directory is written, synced and renamed over the target, so a
// crash leaves the old content or the new, never a mix. An existing file
// keeps its permission bits; a new one gets 0644 (less the umask). Missing
// parent directories are created.
func writeAtomic(root *os.Root, rel string, data []byte) (err error) {
	target, err := realTarget(root, rel)
	if err != nil {
		return err
	}
	perm, existing := fs.FileMode(0o644), false
	if fi, err := root.Stat(target); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory", rel)
		}
		perm, existing = fi.Mode().Perm(), true
	}
	dir := path.Dir(target)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return err
	}
	tmp := path.Join(dir, tempName(path.Base(target)))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if existing {
		if err := f.Chmod(perm); err != nil { // the umask applied at creation
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := root.Rename(tmp, target); err != nil {
		return err
	}
	if d, err := openDir(root, dir); err == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}

func tempName(base string) string {
	var b [6]byte
	rand.Read(b[:])
	if len(base) > 100 {
		i := 100
		for i > 0 && !utf8.RuneStart(base[i]) {
			i--
		}
		base = base[:i]
	}
	return "." + base + "." + hex.EncodeToString(b[:]) + ".shiro-tmp"
}
