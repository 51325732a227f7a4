// Package atomicfile replaces files so that a reader, or a crash, sees the
// old content or the new, never a part of either.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces name with data: a temporary file in the same
// directory (created with its parents, 0700), perm, fsync, rename, and a
// best-effort fsync of the directory so the rename itself is durable.
func WriteFile(name string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
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
	if err := os.Rename(f.Name(), name); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
