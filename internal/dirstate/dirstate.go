// Package dirstate describes a directory tree for tests that compare one
// before and after something changed it: each path with its kind, mode
// and content.
package dirstate

import (
	"io/fs"
	"os"
	"path/filepath"
)

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
