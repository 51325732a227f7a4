package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTheOpenedDirectoryStays: the path swapped for another directory, or
// for a symlink to one, after Open changes nothing the Workspace reads,
// writes or names: all of it is the directory that was opened.
func TestTheOpenedDirectoryStays(t *testing.T) {
	t.Parallel()
	for _, swap := range []string{"another directory", "a symlink"} {
		t.Run(swap, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			dir := filepath.Join(base, "ws")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("original"), 0o644); err != nil {
				t.Fatal(err)
			}
			ws, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			before, err := PathID(dir)
			if err != nil {
				t.Fatal(err)
			}
			moved := filepath.Join(base, "moved")
			if err := os.Rename(dir, moved); err != nil {
				t.Fatal(err)
			}
			other := filepath.Join(base, "other")
			if err := os.Mkdir(other, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(other, "a.txt"), []byte("other"), 0o644); err != nil {
				t.Fatal(err)
			}
			if swap == "a symlink" {
				err = os.Symlink(other, dir)
			} else {
				err = os.Rename(other, dir)
			}
			if err != nil {
				t.Fatal(err)
			}

			if ws.Path() != dir {
				t.Errorf("Path() = %q, want %q", ws.Path(), dir)
			}
			got, err := ws.Root().ReadFile("a.txt")
			if err != nil || string(got) != "original" {
				t.Errorf("read through the root: %q, %v; want the original directory's file", got, err)
			}
			if err := ws.Gate().WriteFile("b.txt", []byte("written")); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(moved, "b.txt")); err != nil {
				t.Errorf("the gate's write did not land in the opened directory: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "b.txt")); err == nil {
				t.Errorf("the gate's write landed in the directory now at the path")
			}
			id, err := ws.ID()
			if err != nil {
				t.Fatal(err)
			}
			if id != before {
				t.Errorf("ID() = %q, want the opened directory's %q", id, before)
			}
			now, err := PathID(dir)
			if err != nil {
				t.Fatal(err)
			}
			if now == id {
				t.Errorf("the directory now at the path has the opened one's ID %q", id)
			}
		})
	}
}

func TestOpenRefusesWhatIsNoDirectory(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ws, err := Open(f); err == nil {
		ws.Close()
		t.Fatal("Open of a file succeeded")
	}
}
