//go:build !linux

package tools

import (
	"io/fs"
	"os"
)

// dirReader opens the directories of one walk through os.Root.
type dirReader struct{ root *os.Root }

func newDirReader(root *os.Root, start string, _ bool) (*dirReader, error) {
	f, err := openDir(root, displayRel(start))
	if err != nil {
		return nil, err
	}
	f.Close()
	return &dirReader{root: root}, nil
}

func (r *dirReader) close() {}

func (r *dirReader) open(rel string) (*os.File, error) { return openDir(r.root, displayRel(rel)) }

func (r *dirReader) readFileIn(_ *os.File, rel, name string) ([]byte, error) {
	return readRegular(r.root, joinRel(rel, name))
}

// lstat reads rel's lstat data through the root (inode and change time
// stay zero here, so unchanged files are recognised by size and mtime).
func (r *dirReader) lstat(_ *os.File, rel, _ string) (FileStat, error) {
	fi, err := r.root.Lstat(rel)
	if err != nil {
		return FileStat{}, err
	}
	return FileStat{Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime().UnixNano()}, nil
}

// StatOf has no lstat data to read here: false.
func StatOf(fs.FileInfo) (FileStat, bool) { return FileStat{}, false }

// list reads the entries of the open directory dir.
func (r *dirReader) list(dir *os.File, _ string) ([]dirent, error) { return listDirEntries(dir) }
