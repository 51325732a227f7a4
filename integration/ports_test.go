package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/kube"
)

// The ports tests open a sandbox in this process, as the user shiro runs
// as: a test starts its own test binary again as the hostile suite's
// normal user (portsChild set), and that run opens the sandbox, dials its
// ports through the helper and looks at the container.
const (
	portsChild  = "SHIRO_PORTS_CHILD"
	portsWS     = "SHIRO_PORTS_WS"
	portsHelper = "SHIRO_PORTS_HELPER"
	// sitePort is where the tests' server listens in the sandbox.
	sitePort = 8765
	siteText = "hello from the sandbox"
)

var (
	portsBinOnce sync.Once
	portsBinDir  string
)

// shortHome is a HOME for h's user short enough for the session sockets'
// paths (a Unix socket's is at most about 100 bytes): under the hostile
// suite's, the helper would carry every connection's bytes itself.
func shortHome(t *testing.T, h *hostile) string {
	t.Helper()
	home, err := os.MkdirTemp("/tmp", "sp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chown(home, h.uid, h.gid); err != nil {
		t.Fatal(err)
	}
	return home
}

// asUser runs test (the caller) again as h's user in a copy of this test
// binary, with HOME home, the workspace ws and env, and fails t when that
// run did not pass.
func asUser(t *testing.T, h *hostile, test, home, ws string, env ...string) {
	t.Helper()
	portsBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shiro-ports-bin-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		copyFile(t, self, filepath.Join(dir, "integration.test"), 0o755)
		copyFile(t, testenv.Helper(t), filepath.Join(dir, "shiro-helper"), 0o755)
		portsBinDir = dir
	})
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	env = append(env, "HOME="+home, portsChild+"=1", portsWS+"="+ws, portsHelper+"="+filepath.Join(portsBinDir, "shiro-helper"))
	if v := os.Getenv(testenv.KubeconfigEnv); v != "" {
		env = append(env, testenv.KubeconfigEnv+"="+v)
	}
	cmd := h.command(ctx, ws, env, filepath.Join(portsBinDir, "integration.test"), "-test.run", "^"+test+"$", "-test.v", "-test.count=1")
	out, err := cmd.CombinedOutput()
	t.Logf("as %d:%d:\n%s", h.uid, h.gid, out)
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+test)) {
		t.Fatalf("the run as the user failed: %v", err)
	}
}

// inChild reports whether this is the run as the user.
func inChild() bool { return os.Getenv(portsChild) == "1" }

// siteServer is a small HTTP server in Perl: a process per connection,
// so that two are served at once.
const siteServer = `use IO::Socket::INET;
$SIG{CHLD} = "IGNORE";
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 8765, Listen => 16, ReuseAddr => 1) or die "listen: $!";
while (1) {
	my $c = $l->accept or next;
	if (fork() == 0) {
		while (my $line = <$c>) { last if $line =~ /^\r?\n$/ }
		my $b = "` + siteText + `\n";
		print $c "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " . length($b) . "\r\n\r\n" . $b;
		close $c;
		exit 0;
	}
	close $c;
}
`

// startSite runs an HTTP server on sitePort in the sandbox as a command of
// the session, until the returned stop.
func startSite(t *testing.T, sb sandbox.Sandbox) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	var out bytes.Buffer
	go func() {
		defer close(done)
		_, _ = sb.Run(ctx, sandbox.Command{
			Shell:  "cat > /tmp/site.pl <<'EOF'\n" + siteServer + "EOF\nexec perl /tmp/site.pl",
			Stdout: &out, Stderr: &out,
		})
	}()
	return func() {
		cancel()
		<-done
	}
}

// waitListening dials port until something listens there (the server
// starting), and returns that connection.
func waitListening(t *testing.T, d sandbox.PortDialer, port int) net.Conn {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := d.DialPort(t.Context(), port)
		if err == nil {
			return c
		}
		if !errors.Is(err, sandbox.ErrNothingListens) || time.Now().After(deadline) {
			t.Fatalf("DialPort(%d): %v", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getPage GETs the site's page through DialPort.
func getPage(t *testing.T, d sandbox.PortDialer) {
	t.Helper()
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialPort(ctx, sitePort)
		},
	}}
	resp, err := hc.Get("http://sandbox/index.html")
	if err != nil {
		t.Fatalf("GET through the port: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != siteText {
		t.Fatalf("GET: %s %q", resp.Status, body)
	}
}

// twoAtOnce opens two connections to the site, then asks on both and reads
// both answers.
func twoAtOnce(t *testing.T, d sandbox.PortDialer) {
	t.Helper()
	var conns []net.Conn
	for range 2 {
		c, err := d.DialPort(t.Context(), sitePort)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for _, c := range slices.Backward(conns) {
		if _, err := io.WriteString(c, "GET /index.html HTTP/1.0\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil || !bytes.Contains(b, []byte(siteText)) {
			t.Fatalf("connection %d: %v %q", i, err, b)
		}
	}
}

// nothingListensFast dials a port nothing listens on.
func nothingListensFast(t *testing.T, d sandbox.PortDialer) {
	t.Helper()
	start := time.Now()
	_, err := d.DialPort(t.Context(), 9)
	if !errors.Is(err, sandbox.ErrNothingListens) {
		t.Fatalf("DialPort to a closed port: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refusal took %v", took)
	}
}

// listenersNameTheSite checks the sandbox's listeners name the server.
func listenersNameTheSite(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	ls, err := sb.(sandbox.PortLister).Listeners(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("listeners: %+v", ls)
	for _, l := range ls {
		if l.Port == sitePort {
			if l.Address != "127.0.0.1" || l.Command != "perl /tmp/site.pl" || l.Pid == 0 {
				t.Errorf("the listener on %d: %+v", sitePort, l)
			}
			return
		}
	}
	t.Fatalf("no listener on %d among %+v", sitePort, ls)
}

// TestPortsDocker: in a real Docker sandbox under the default network
// mode, as a normal user, a server started as a command is reached
// through DialPort (one connection, then two at once), a port nothing
// listens on fails fast, Listeners names the server, the container
// publishes no port and has no network, and once the container is
// removed the next DialPort reaches its replacement.
func TestPortsDocker(t *testing.T) {
	if !inChild() {
		t.Parallel()
		h := newHostile(t)
		ws := h.workspace("ports")
		asUser(t, h, "TestPortsDocker", shortHome(t, h), ws)
		return
	}
	ws := os.Getenv(portsWS)
	api := testenv.RequireDocker(t)
	ctx := t.Context()
	sb, err := docker.Backend().Open(ctx, sandbox.Spec{Settings: sandbox.Settings{WorkspaceMode: sandbox.WorkspaceMount}, Workspace: ws, HelperBinary: os.Getenv(portsHelper)})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	d := sb.(sandbox.PortDialer)

	stop := startSite(t, sb)
	first := waitListening(t, d, sitePort)
	// A local engine's helper hands the socket itself over: the host
	// holds the sandbox's TCP socket, which the kernel splices.
	if _, ok := first.(*net.TCPConn); !ok {
		t.Errorf("DialPort on a local engine returned a %T, not the handed-over socket", first)
	}
	first.Close()
	getPage(t, d)
	twoAtOnce(t, d)
	nothingListensFast(t, d)
	listenersNameTheSite(t, sb)

	ids := testenv.ContainerIDs(t, api, ws)
	if len(ids) != 1 {
		t.Fatalf("containers of the workspace: %v", ids)
	}
	in, err := api.ContainerInspect(ctx, ids[0], client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pb := in.Container.HostConfig.PortBindings; len(pb) != 0 {
		t.Errorf("the container publishes ports: %v", pb)
	}
	if pa := in.Container.HostConfig.PublishAllPorts; pa {
		t.Error("the container publishes all its ports")
	}
	if nm := string(in.Container.HostConfig.NetworkMode); nm != "none" {
		t.Errorf("the container's network mode is %q, want none", nm)
	}
	if ns := in.Container.NetworkSettings; ns != nil && len(ns.Ports) != 0 {
		t.Errorf("the container's ports: %v", ns.Ports)
	}

	// The container goes; the next DialPort opens a channel to the new
	// one (where nothing listens yet), and the server started there
	// again is reached.
	if _, err := api.ContainerRemove(ctx, ids[0], client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := d.DialPort(ctx, sitePort); !errors.Is(err, sandbox.ErrNothingListens) {
		t.Fatalf("DialPort after the container was removed: %v, want ErrNothingListens from the new one", err)
	}
	stop = startSite(t, sb)
	defer stop()
	waitListening(t, d, sitePort).Close()
	getPage(t, d)
	if now := testenv.ContainerIDs(t, api, ws); len(now) != 1 || now[0] == ids[0] {
		t.Errorf("containers after the replacement: %v (before %v)", now, ids)
	}
}

// TestPortsKube: the same DialPort on the Kubernetes backend, where the
// connection's bytes travel in messages on the exec's streams.
func TestPortsKube(t *testing.T) {
	if !inChild() {
		t.Parallel()
		kc := testenv.RequireKube(t)
		h := newHostile(t)
		kubeconfig, _ := h.kubeconfig(kc)
		ws := h.workspace("ports-kube")
		home := shortHome(t, h)
		flags := []string{"--backend", "kubernetes", "--memory", "512m", "--cpus", "1", "--network", "none"}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if out, err := h.command(ctx, ws, []string{"KUBECONFIG=" + kubeconfig, "HOME=" + home}, h.bin, append([]string{"sandbox", "rm"}, flags...)...).CombinedOutput(); err != nil {
				t.Logf("shiro sandbox rm: %v: %s", err, out)
			}
		})
		asUser(t, h, "TestPortsKube", home, ws, "KUBECONFIG="+kubeconfig)
		return
	}
	ws := os.Getenv(portsWS)
	ctx := t.Context()
	sb, err := kube.Backend().Open(ctx, sandbox.Spec{
		Settings:     sandbox.Settings{Backend: sandbox.BackendKubernetes, Network: sandbox.NetworkNone, Memory: 512 << 20, CPUs: 1, WorkspaceMode: sandbox.WorkspaceCopy},
		Workspace:    ws,
		HelperBinary: os.Getenv(portsHelper),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	d := sb.(sandbox.PortDialer)
	stop := startSite(t, sb)
	defer stop()
	first := waitListening(t, d, sitePort)
	// No descriptor crosses a cluster: the bytes travel on the exec.
	if _, ok := first.(*net.TCPConn); ok {
		t.Errorf("DialPort on Kubernetes returned a %T", first)
	}
	first.Close()
	getPage(t, d)
	twoAtOnce(t, d)
	nothingListensFast(t, d)
	listenersNameTheSite(t, sb)
}
