package owner

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestLoadKeyIsMadeOnceAndKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := LoadKey(dir)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if string(k) != string(keys[0]) {
			t.Fatal("racing loaders got different keys")
		}
	}
	fi, err := os.Stat(filepath.Join(dir, keyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, mode %v; want 0600", err, fi.Mode())
	}
	again, err := LoadKey(dir)
	if err != nil || string(again) != string(keys[0]) {
		t.Errorf("reload: %v, same key %v", err, string(again) == string(keys[0]))
	}
}

func TestLoadKeyRefusesAFileItDidNotMake(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, keyFile), []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(dir); err == nil {
		t.Error("LoadKey accepted a key file that is not hex")
	}
}

func TestTokenBindsEveryField(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	base := Token(key, "pod", "name", "/ws", "cfg")
	if !Valid(key, base, "pod", "name", "/ws", "cfg") {
		t.Fatal("a token does not check against its own fields")
	}
	for name, tok := range map[string]string{
		"kind":      Token(key, "claim", "name", "/ws", "cfg"),
		"name":      Token(key, "pod", "other", "/ws", "cfg"),
		"workspace": Token(key, "pod", "name", "/other", "cfg"),
		"config":    Token(key, "pod", "name", "/ws", "other"),
		"key":       Token([]byte("another key of sixteen+ bytes"), "pod", "name", "/ws", "cfg"),
	} {
		if tok == base {
			t.Errorf("changing the %s leaves the token as it was", name)
		}
	}
}

func TestWorkspaceIDChangesWithTheDirectory(t *testing.T) {
	// Remove and make the directory again as fast as it goes: most rounds
	// land in the same tick of the kernel's coarse clock (the birth time),
	// and the filesystem hands the freed inode straight back.
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	prev, err := WorkspaceID(ws)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 50 {
		if err := os.Remove(ws); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		id, err := WorkspaceID(ws)
		if err != nil {
			t.Fatal(err)
		}
		if id == prev {
			t.Fatalf("round %d: a directory made again at %s has the same id %s", round, ws, id)
		}
		if WorkspaceVolumeKey(ws, id) == WorkspaceVolumeKey(ws, prev) {
			t.Fatalf("round %d: the volume key does not follow the directory's id", round)
		}
		prev = id
	}
}

func TestWorkspaceIDOfAPathThroughASymlinkIsTheDirectorys(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	a, err := WorkspaceID(ws)
	if err != nil {
		t.Fatal(err)
	}
	b, err := WorkspaceID(link)
	if err != nil || b != a {
		t.Errorf("through the symlink: %q, %v; want the directory's id %q", b, err, a)
	}
}
