package helper

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

func newTestRunner(t *testing.T, opts ...RunnerOption) *Runner {
	t.Helper()
	r, err := NewRunner(NewSessionID(), append([]RunnerOption{WithDir(t.TempDir()), WithEnv(sandboxtest.HostEnv(t)), WithReaper(SelfReaper())}, opts...)...)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	t.Cleanup(func() {
		if err := r.KillSession(); err != nil {
			t.Errorf("KillSession: %v", err)
		}
	})
	return r
}

func TestValidateSessionID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id string
		ok       bool
	}{
		{"random", NewSessionID(), true},
		{"letters digits dash underscore", "aZ09-_", true},
		{"empty", "", false},
		{"dot would break prefixes", "a.b", false},
		{"equals", "a=b", false},
		{"too long", strings.Repeat("a", 65), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := ValidateSessionID(tt.id); (err == nil) != tt.ok {
				t.Errorf("ValidateSessionID(%q) = %v, want ok %v", tt.id, err, tt.ok)
			}
		})
	}
}

func TestParseOOMKills(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data string
		n          uint64
		ok         bool
	}{
		{"cgroup v2 memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n", 2, true},
		{"cgroup v1 memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", 7, true},
		{"no counter", "low 0\nhigh 0\n", 0, false},
		{"garbage counter", "oom_kill x\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if n, ok := parseOOMKills([]byte(tt.data)); n != tt.n || ok != tt.ok {
				t.Errorf("parseOOMKills = %d, %v; want %d, %v", n, ok, tt.n, tt.ok)
			}
		})
	}
}

func TestRunnerOutOfMemory(t *testing.T) {
	t.Parallel()
	events := filepath.Join(t.TempDir(), "memory.events")
	if err := os.WriteFile(events, []byte("oom 0\noom_kill 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newTestRunner(t)
	r.oom = newOOMCounter([]string{filepath.Join(t.TempDir(), "missing"), events})
	tests := []struct {
		name, shell string
		oom         bool
	}{
		{"counter unchanged", "true", false},
		{"counter grew", "printf 'oom 1\\noom_kill 4\\n' > " + events, true},
	}
	for _, tt := range tests { // sequential: they share the counter
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Run(t.Context(), sandbox.Command{Shell: tt.shell})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Run: %+v, %v", res, err)
			}
			if res.OutOfMemory != tt.oom {
				t.Errorf("OutOfMemory = %v, want %v", res.OutOfMemory, tt.oom)
			}
		})
	}
}

func TestKillMarker(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t)
	start := func() *Process {
		p, err := r.Start(t.Context(), sandbox.Command{Args: []string{"sleep", "350"}})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		return p
	}
	a, b := start(), start()
	if err := KillMarker(a.Marker(), false); err != nil {
		t.Fatalf("KillMarker: %v", err)
	}
	if res, err := a.Wait(); err != nil || res.Signal != "SIGKILL" {
		t.Errorf("a after KillMarker: %+v, %v; want SIGKILL", res, err)
	}
	select {
	case <-b.exited:
		t.Fatal("KillMarker of a's exact marker killed b too")
	default:
	}
	if err := KillMarker(r.SessionID()+".", true); err != nil {
		t.Fatalf("KillMarker prefix: %v", err)
	}
	if res, err := b.Wait(); err != nil || res.Signal != "SIGKILL" || res.ExitCode != 137 {
		t.Errorf("b after the session kill: %+v, %v; want SIGKILL 137", res, err)
	}
	if err := KillMarker("", true); err == nil {
		t.Error("KillMarker with an empty prefix succeeded: it would kill every marked process")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRunnerWriteError(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t)
	var errb strings.Builder
	res, err := r.Run(t.Context(), sandbox.Command{Shell: "echo out; echo err >&2", Stdout: failWriter{}, Stderr: &errb})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Run error = %v, want the writer's error", err)
	}
	if res.ExitCode != 0 || errb.String() != "err\n" {
		t.Errorf("Run = %+v, stderr %q; want the command to finish with its stderr", res, errb.String())
	}
}

func TestRunnerKeepsOutputAfterGrace(t *testing.T) {
	t.Parallel()
	// The command writes less than a pipe holds, then leaves a background
	// child holding the pipe. The output writer blocks on its first chunk
	// until Wait has given up waiting for EOF, so the rest of the output is
	// still in the pipe then: it must arrive all the same.
	r := newTestRunner(t, WithPipeGrace(10*time.Millisecond))
	release := make(chan struct{})
	r.afterGrace = func() { close(release) }
	out := &blockingWriter{release: release}
	res, err := r.Run(t.Context(), sandbox.Command{
		Args:   []string{"sh", "-c", `head -c 50000 /dev/zero | tr '\0' x; (exec sleep 370 &)`},
		Stdout: out,
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if out.n != 50000 {
		t.Errorf("got %d bytes of output, want 50000", out.n)
	}
}

// blockingWriter counts bytes; its first Write waits for release.
type blockingWriter struct {
	release <-chan struct{}
	n       int
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.n += len(p)
	return len(p), nil
}
