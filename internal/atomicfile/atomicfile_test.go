package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesWholeAndLeavesNoTemp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "sub", "f.json")
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	fi, _ := os.Stat(name)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(name))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestWriteFileFailureKeepsTheOldFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := WriteFile(name, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory in the way of the rename makes it fail.
	blocked := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(blocked, []byte("new"), 0o600); err == nil {
		t.Fatal("writing over a non-empty directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("a temporary file was left behind: %v", entries)
	}
	if got, _ := os.ReadFile(name); string(got) != "old" {
		t.Errorf("old file changed: %q", got)
	}
}
