// Package dirstate writes and describes directory trees for tests that
// compare one before and after something changed it: each path with its
// kind, mode and content.
package dirstate

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Write makes files under dir, creating their directories: a name is
// slash-separated, and one ending in "*" is made executable; a content
// starting "->" makes a symlink to the rest, replacing what is there.
func Write(dir string, files map[string]string) error {
	for name, content := range files {
		mode := fs.FileMode(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			_ = os.Remove(p)
			if err := os.Symlink(target, p); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return err
		}
	}
	return nil
}

// Describe maps every path below dir (slash-separated, relative) to
// "dir", "link -> TARGET", or "PERM CONTENT" for a regular file (PERM as
// fs.FileMode prints it: -rw-r--r--).
func Describe(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link -> " + target
		case fi.IsDir():
			out[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fi.Mode().Perm().String() + " " + string(data)
		}
		return nil
	})
	return out, err
}
