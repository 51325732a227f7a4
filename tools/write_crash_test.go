package tools

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/internal/hostwrite"
)

const crashChildEnv = "SHIRO_TEST_WRITE_CHILD_WORKSPACE"

// crashChildSize is how much the child writes: enough that the write and
// fsync take a while, so the kill lands in the middle.
const crashChildSize = 16 << 20

// In the child (re-executed test binary), write a large file with
// write_file and exit.
func TestMain(m *testing.M) {
	if ws := os.Getenv(crashChildEnv); ws != "" {
		os.Exit(crashChild(ws))
	}
	goleak.VerifyTestMain(m)
}

func crashChild(ws string) int {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return 2
	}
	gate, err := hostwrite.New(root, ws)
	if err != nil {
		return 2
	}
	input, _ := json.Marshal(map[string]string{"path": "big.txt", "content": strings.Repeat("n", crashChildSize)})
	res, err := NewWriteFile().Run(context.Background(), &Env{Workspace: ws, Root: root, Gate: gate}, input)
	if err != nil || res.IsError {
		return 3
	}
	return 0
}

// A write killed at any moment leaves the old content or the new, never a
// truncated or mixed file.
func TestWriteFileKilledMidWrite(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Repeat("o", 1<<20)
	killedBeforeRename := 0
	// Kill once the temporary file holds this much (0: as soon as it exists).
	for _, at := range []int64{0, 1 << 20, 8 << 20, crashChildSize} {
		ws := t.TempDir()
		target := filepath.Join(ws, "big.txt")
		if err := os.WriteFile(target, []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+ws)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		deadline := time.After(60 * time.Second)
	poll:
		for !tempReached(ws, at) {
			select {
			case <-done:
				break poll
			case <-deadline:
				break poll
			case <-time.After(200 * time.Microsecond): // polling the file system
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-done

		data, err := os.ReadFile(target)
		if err != nil {
			t.Fatalf("kill at %d: %v", at, err)
		}
		switch {
		case string(data) == old:
			t.Logf("killed at %d bytes: old content", at)
			killedBeforeRename++
		case len(data) == crashChildSize && strings.Count(string(data), "n") == crashChildSize:
			t.Logf("killed at %d bytes: new content", at)
		default:
			t.Fatalf("kill at %d: target holds %d bytes, neither old nor new", at, len(data))
		}
	}
	if killedBeforeRename == 0 {
		t.Error("no kill landed before the rename: the test proved nothing")
	}
}

func tempReached(ws string, size int64) bool {
	matches, _ := filepath.Glob(filepath.Join(ws, ".big.txt.*.shiro-tmp"))
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.Size() >= size {
			return true
		}
	}
	return false
}
