package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// findScript prints "pid ppid pgid sid marked cmdline" for every process whose
// command line holds $1, itself excepted, by scanning /proc: it needs only
// sh and tr, so it works in any image (grep, where there is one, makes it
// faster). marked is 1 when the process's environment holds
// sandbox.MarkerEnv (0 also when it cannot be read). The pattern is an
// argument, not part of the script, so only this sh's own command line holds
// it, and that one is skipped.
const findScript = `p=$1
fields() { ppid=$2; pgid=$3; sid=$4; }
if command -v grep >/dev/null 2>&1; then
  set -- $(grep -lsaF -e "$p" /proc/[0-9]*/cmdline)
else
  set -- /proc/[0-9]*/cmdline
fi
for f; do
  d=${f%/cmdline}
  [ "${d#/proc/}" = "$$" ] && continue
  c=$(tr '\0\n' '  ' 2>/dev/null < "$f") || continue
  case "$c" in *"$p"*) ;; *) continue;; esac
  read -r s 2>/dev/null < "$d/stat" || continue
  fields ${s##*) }
  e=$(tr '\0' ' ' 2>/dev/null < "$d/environ")
  case " $e" in *" ` + sandbox.MarkerEnv + `="*) m=1;; *) m=0;; esac
  echo "${d#/proc/} $ppid $pgid $sid $m $c"
done`

// Proc is a process Processes found.
type Proc struct {
	Pid, Ppid, Pgid, Sid int
	// Marked says the environment holds sandbox.MarkerEnv.
	Marked  bool
	Cmdline string // arguments joined by spaces
}

func (p Proc) String() string { return fmt.Sprintf("%d %s", p.Pid, p.Cmdline) }

// Processes lists the processes visible in sb whose command line contains
// pattern. It runs sh inside sb, so it sees what the sandbox sees.
func Processes(t testing.TB, sb sandbox.Sandbox, pattern string) []Proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
	defer cancel()
	var out, errb strings.Builder
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", findScript, "sh", pattern}, Stdout: &out, Stderr: &errb})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("list processes matching %q: exit %d, %v: %s", pattern, res.ExitCode, err, errb.String())
	}
	var procs []Proc
	for line := range strings.Lines(out.String()) {
		f := strings.SplitN(strings.TrimSpace(line), " ", 6)
		if len(f) < 6 {
			continue
		}
		var p Proc
		var err1, err2, err3, err4 error
		p.Pid, err1 = strconv.Atoi(f[0])
		p.Ppid, err2 = strconv.Atoi(f[1])
		p.Pgid, err3 = strconv.Atoi(f[2])
		p.Sid, err4 = strconv.Atoi(f[3])
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			t.Fatalf("list processes: bad line %q: %v", line, err)
		}
		p.Marked, p.Cmdline = f[4] == "1", f[5]
		procs = append(procs, p)
	}
	return procs
}

// WaitProcesses polls Processes until cond holds for the list or the
// deadline passes, and returns the last list.
func WaitProcesses(t testing.TB, sb sandbox.Sandbox, pattern string, within time.Duration, cond func([]Proc) bool) ([]Proc, bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		procs := Processes(t, sb, pattern)
		if cond(procs) {
			return procs, true
		}
		if time.Now().After(deadline) {
			return procs, false
		}
	}
}

// token returns random digits that make a test's command lines unique, also
// across test binaries sharing the machine.
func token() string { return fmt.Sprintf("%09d", rand.N(1_000_000_000)) }

// sleepArg returns a sleep duration of about base seconds that holds tok, so
// that Processes can find exactly one test's sleeps by tok.
func sleepArg(base int, tok string) string { return fmt.Sprintf("%d.%s", base, tok) }

// Buffer is a goroutine-safe output sink. One made by NewBuffer(want)
// also closes Seen once it holds want; a zero Buffer only collects.
type Buffer struct {
	mu     sync.Mutex
	buf    strings.Builder
	want   string
	seen   chan struct{}
	seenAt time.Time // set before seen is closed
	closed bool
}

// NewBuffer returns a Buffer that tells when it holds want.
func NewBuffer(want string) *Buffer {
	return &Buffer{want: want, seen: make(chan struct{})}
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if b.seen != nil && !b.closed && strings.Contains(b.buf.String(), b.want) {
		b.closed = true
		b.seenAt = time.Now()
		close(b.seen)
	}
	return len(p), nil
}

// Seen is closed once the buffer holds the string NewBuffer was given.
func (b *Buffer) Seen() <-chan struct{} { return b.seen }

// SeenAt is when Seen was closed.
func (b *Buffer) SeenAt() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seenAt
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// HostEnv returns the host's environment with HOME set to a fresh temporary
// directory, for sandboxes that run on the host: a login shell then skips
// the user's profile, which can be slow and, under parallel tests, contended
// (pyenv's rehash lock, for one).
func HostEnv(t testing.TB) []string {
	env := []string{"HOME=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return env
}
