package confine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxPreview bounds the file ReadPreview reads.
const MaxPreview = 4 << 20

// ReadPreview reads the file at a model's path p (relative to the
// workspace, or absolute inside it) through root, for an approval
// preview: its content, whether it exists, or why it cannot be shown (a
// short phrase: "no such file", "binary file").
func ReadPreview(root *os.Root, workspace, p string) (content string, exists bool, problem string) {
	rel := filepath.Clean(p)
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(filepath.Clean(workspace), rel)
		if err != nil {
			return "", false, "the path is outside the workspace"
		}
		rel = r
	}
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false, "the path is outside the workspace"
	}
	// Opened without blocking and checked on the descriptor: a FIFO
	// swapped in by the sandbox cannot stall the preview.
	f, err := OpenRegular(root, rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, "no such file"
	case errors.Is(err, ErrNotRegular):
		return "", true, "not a regular file"
	case IsEscape(root, err):
		return "", false, "the path leads outside the workspace"
	case err != nil:
		return "", false, err.Error()
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return "", true, err.Error()
	case fi.Size() > MaxPreview:
		return "", true, fmt.Sprintf("the file is too large to preview (%d bytes)", fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxPreview))
	if err != nil {
		return "", true, err.Error()
	}
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return "", true, "binary file"
	}
	return string(data), true, ""
}
