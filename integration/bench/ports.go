package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/kube"
	"github.com/shiroagent/shiro/sandbox/publish"
)

// bulkServer is the server the ports section runs in the sandbox and, as
// the baseline, on the host: it listens on 127.0.0.1:$1 (0: any port),
// prints the port, and sends each connection $2 bytes then closes it.
// Perl, because the default image has it and so does the host.
const bulkServer = `use IO::Socket::INET;
$SIG{CHLD} = "IGNORE";
my ($port, $total) = @ARGV;
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $port, Listen => 64, ReuseAddr => 1) or die "listen: $!";
$| = 1;
print "listening ", $l->sockport, "\n";
my $buf = "x" x 65536;
while (1) {
	my $c = $l->accept or next;
	if (fork() == 0) {
		my $left = $total;
		while ($left > 0) {
			my $n = $left < 65536 ? $left : 65536;
			my $w = syswrite($c, $buf, $n);
			last unless defined $w;
			$left -= $w;
		}
		close $c;
		exit 0;
	}
	close $c;
}
`

// Sizes of the ports section.
const (
	bulkBytes    = 512 << 20 // one throughput run
	bulkPort     = 9000      // the bulk server's port in the sandbox
	greetPort    = 9001      // a server that sends one byte
	setupRuns    = 50
	throughRuns  = 3
	overheadRuns = 200
)

// portsBench measures a published port (issue 29): the throughput through
// the Publisher (--publish) against a direct connection to the
// same server on the host, and the set-up of a connection (the channel's
// per-call overhead while a job streams output is the jobs section's).
func portsBench(ctx context.Context, r *report) error {
	ws, err := os.MkdirTemp("", "shiro-bench-ports-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	_, sb, done, err := openSandbox(ctx, ws)
	if err != nil {
		return err
	}
	defer done()
	r.section("ports (issue 29)")

	script := filepath.Join(ws, "bulk.pl") // the host's copy, for the baseline
	if err := os.WriteFile(script, []byte(bulkServer), 0o644); err != nil {
		return err
	}
	stopBulk, err := sandboxServer(ctx, sb, bulkPort, bulkBytes)
	if err != nil {
		return err
	}
	defer stopBulk()
	stopGreet, err := sandboxServer(ctx, sb, greetPort, 1)
	if err != nil {
		return err
	}
	defer stopGreet()
	hostBulk, stopHost, err := hostServer(ctx, script, bulkBytes)
	if err != nil {
		return err
	}
	defer stopHost()
	hostGreet, stopHostGreet, err := hostServer(ctx, script, 1)
	if err != nil {
		return err
	}
	defer stopHostGreet()
	pubBulk, stopPub, err := publishPort(ctx, sb, bulkPort)
	if err != nil {
		return err
	}
	defer stopPub()
	pubGreet, stopPubGreet, err := publishPort(ctx, sb, greetPort)
	if err != nil {
		return err
	}
	defer stopPubGreet()

	// (a) Throughput: the best of three runs each way.
	var direct, published float64
	for range throughRuns {
		d, err := download(hostBulk, bulkBytes)
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		p, err := download(pubBulk, bulkBytes)
		if err != nil {
			return fmt.Errorf("published: %w", err)
		}
		direct, published = max(direct, d), max(published, p)
	}
	ratio := published / direct
	r.add("published port: throughput, best of 3 (512 MiB)", mibps(published), "", true)
	r.add("direct connection on the host: throughput, best of 3", mibps(direct), "", true)
	r.add("published / direct", fmt.Sprintf("%.2fx", ratio), ">= 0.5x", ratio >= 0.5)

	// (b) Set-up: connect to the first byte.
	pubSetup, err := timeN(setupRuns, func() error { return firstByte(pubGreet) })
	if err != nil {
		return err
	}
	directSetup, err := timeN(setupRuns, func() error { return firstByte(hostGreet) })
	if err != nil {
		return err
	}
	dialOnly, err := timeN(setupRuns, func() error {
		c, err := sb.DialPort(ctx, greetPort)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		return err
	}
	ps := median(pubSetup)
	r.add("published port: connect to first byte, median of 50", ms(ps), "<= 5 ms", ps <= 5*time.Millisecond)
	r.add("DialPort alone, median of 50", ms(median(dialOnly)), "", true)
	r.add("direct connection on the host: connect to first byte, median of 50", ms(median(directSetup)), "", true)

	if os.Getenv("SHIRO_TEST_KUBECONFIG") == "" {
		r.add("Kubernetes: not measured (no SHIRO_TEST_KUBECONFIG)", "", "", true)
		return nil
	}
	return kubePorts(ctx, r, direct)
}

// kubeBulkBytes is one throughput run on Kubernetes, where the bytes
// travel in messages on the exec's streams.
const kubeBulkBytes = 64 << 20

// kubePorts measures a published port on the Kubernetes test cluster
// (the message path): throughput against the direct figure of the Docker
// part, and connection set-up. No targets: the goal is the local
// engine's; these say what the message path costs.
func kubePorts(ctx context.Context, r *report, direct float64) error {
	bin := os.Getenv("SHIRO_BIN")
	state, err := os.MkdirTemp("", "shiro-bench-ports-kube-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	ws, err := os.MkdirTemp("", "shiro-bench-ports-kube-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	c, err := kube.Connect(ctx, kube.ConnectOptions{Kubeconfig: os.Getenv("SHIRO_TEST_KUBECONFIG"), StateDir: state})
	if err != nil {
		return err
	}
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 1001, 1001
	}
	sb, err := c.Open(ctx, kube.Options{Spec: sandbox.Spec{Workspace: ws, HelperBinary: bin + "-helper", UID: uid, GID: gid, Settings: sandbox.Settings{Memory: 512 << 20, CPUs: 1, Network: sandbox.NetworkNone}}})
	if err != nil {
		return err
	}
	defer func() {
		sb.Close()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		_ = c.Remove(cctx, sb.Pod())
		_, _ = c.RemoveClaims(cctx, ws)
	}()
	stopBulk, err := sandboxServer(ctx, sb, bulkPort, kubeBulkBytes)
	if err != nil {
		return err
	}
	defer stopBulk()
	stopGreet, err := sandboxServer(ctx, sb, greetPort, 1)
	if err != nil {
		return err
	}
	defer stopGreet()
	pubBulk, stopPub, err := publishPort(ctx, sb, bulkPort)
	if err != nil {
		return err
	}
	defer stopPub()
	pubGreet, stopPubGreet, err := publishPort(ctx, sb, greetPort)
	if err != nil {
		return err
	}
	defer stopPubGreet()
	var best float64
	for range throughRuns {
		p, err := download(pubBulk, kubeBulkBytes)
		if err != nil {
			return fmt.Errorf("kubernetes: %w", err)
		}
		best = max(best, p)
	}
	setup, err := timeN(20, func() error { return firstByte(pubGreet) })
	if err != nil {
		return err
	}
	r.add("Kubernetes: published port throughput, best of 3 (64 MiB, messages on the exec)", mibps(best), "", true)
	r.add("Kubernetes: published / direct on the host", fmt.Sprintf("%.2fx", best/direct), "", true)
	r.add("Kubernetes: connect to first byte, median of 20", ms(median(setup)), "", true)
	return nil
}

// perCall is the median of a `true` on the channel, after a warm-up.
func perCall(ctx context.Context, sb *docker.Sandbox) (time.Duration, error) {
	run := func() error {
		_, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}})
		return err
	}
	for range 10 {
		if err := run(); err != nil {
			return 0, err
		}
	}
	ds, err := timeN(overheadRuns, run)
	if err != nil {
		return 0, err
	}
	return median(ds), nil
}

// sandboxServer starts the bulk server on port in the sandbox, sending
// total bytes a connection, and waits until it listens.
func sandboxServer(ctx context.Context, sb sandbox.Sandbox, port, total int) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	lines := newLineWriter()
	done := make(chan error, 1)
	go func() {
		// The script goes with the command: a copy-mode sandbox does not
		// see the host's workspace.
		shell := fmt.Sprintf("cat > /tmp/bulk.pl <<'EOF'\n%sEOF\nexec perl /tmp/bulk.pl %d %d", bulkServer, port, total)
		_, err := sb.Run(ctx, sandbox.Command{Shell: shell, Stdout: lines, Stderr: lines})
		done <- err
	}()
	stop := func() { cancel(); <-done }
	select {
	case <-lines.listening:
		return stop, nil
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("the server in the sandbox ended: %v: %s", err, lines.text())
	case <-time.After(30 * time.Second):
		stop()
		return nil, errors.New("the server in the sandbox did not listen within 30 s")
	}
}

// hostServer starts the same server on the host's loopback.
func hostServer(ctx context.Context, script string, total int) (string, func(), error) {
	cmd := exec.CommandContext(ctx, "perl", script, "0", strconv.Itoa(total))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		stop()
		return "", nil, fmt.Errorf("the host's server said %q: %v", line, err)
	}
	return net.JoinHostPort("127.0.0.1", port), stop, nil
}

// publishPort publishes port of sb on an ephemeral port of the host's
// loopback with the Publisher sessions use (sandbox/publish), so the
// figures are those of --publish.
func publishPort(_ context.Context, sb sandbox.PortDialer, port int) (string, func(), error) {
	p := publish.New(publish.Options{Sandbox: func(context.Context) (sandbox.PortDialer, error) { return sb, nil }})
	pt, err := p.Add(publish.Mapping{ContainerPort: port})
	if err != nil {
		p.Close()
		return "", nil, err
	}
	return pt.Address, func() { p.Close() }, nil
}

// download reads a connection to addr to its end and returns bytes/s.
func download(addr string, want int64) (float64, error) {
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		return 0, err
	}
	if n != want {
		return 0, fmt.Errorf("read %d bytes, want %d", n, want)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// firstByte connects to addr and reads the server's first byte.
func firstByte(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadFull(c, b[:])
	return err
}

func mibps(bps float64) string { return fmt.Sprintf("%.0f MiB/s", bps/(1<<20)) }

// lineWriter collects a server's output and says when it listens.
type lineWriter struct {
	mu        sync.Mutex
	buf       strings.Builder
	listening chan struct{}
	once      sync.Once
}

func newLineWriter() *lineWriter { return &lineWriter{listening: make(chan struct{})} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() < 4096 {
		w.buf.Write(p)
	}
	if strings.Contains(w.buf.String(), "listening ") {
		w.once.Do(func() { close(w.listening) })
	}
	return len(p), nil
}

func (w *lineWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
