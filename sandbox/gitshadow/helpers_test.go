package gitshadow

import (
	"crypto/sha1"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// fixIndexChecksum recomputes an index file's trailing checksum.
func fixIndexChecksum(b []byte) []byte {
	body := b[:len(b)-20]
	sum := sha1.Sum(body)
	return append(append([]byte{}, body...), sum[:]...)
}

func sortStrings(s []string) { sort.Strings(s) }

// normalUserEnv marks the copy of the test binary asNormalUser starts.
const normalUserEnv = "GITSHADOW_TEST_AS_NORMAL_USER"

// asNormalUser runs test as a normal user: directly when the test runs as
// one, else in a copy of the test binary started as nobody that runs only
// this test. What test makes must be in directories that user can use
// (t.TempDir in the copy is).
func asNormalUser(t *testing.T, test func(t *testing.T)) {
	t.Helper()
	if os.Geteuid() != 0 || os.Getenv(normalUserEnv) == "1" {
		test(t)
		return
	}
	// t.TempDir's parent is root's alone.
	tmp, err := os.MkdirTemp("", "gitshadow-normal-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	// The build directory is root's alone: run a copy.
	bin := filepath.Join(tmp, "gitshadow.test")
	data, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(bin, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), normalUserEnv+"=1", "TMPDIR="+tmp, "HOME="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("as a normal user: %v\n%s", err, out)
	}
}
