package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

// These tests run against the test cluster (scripts/kube-test-cluster.sh;
// make test brings it up and sets SHIRO_TEST_KUBECONFIG), as a user with
// only the namespace rights docs/kubernetes.md lists, in a namespace that
// enforces the restricted pod security standard.

// testCluster connects to the test cluster with an owner key of the test's
// own.
func testCluster(t *testing.T) *Cluster {
	t.Helper()
	kc := testenv.RequireKube(t)
	c, err := Connect(t.Context(), ConnectOptions{Kubeconfig: kc, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testOptions are small limits (the node has two cores), the test user
// and the helper built beside the test's shiro.
func testOptions(t *testing.T, ws string) Options {
	uid, gid := testenv.SandboxUser()
	return Options{Spec: sandbox.Spec{Workspace: ws, HelperBinary: testenv.Helper(t), UID: uid, GID: gid, Settings: sandbox.Settings{Memory: 512 << 20, CPUs: 1, Network: sandbox.NetworkNone}, Progress: logWriter{t}}}
}

// workspace is a fresh workspace whose pods and claim are removed when the
// test ends.
func workspace(t *testing.T, c *Cluster) string {
	t.Helper()
	ws := t.TempDir()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pods, err := c.ownPods(ctx, ws)
		if err != nil {
			t.Logf("cleanup: %v", err)
		}
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		if err := c.Remove(ctx, names...); err != nil {
			t.Logf("cleanup: %v", err)
		}
		claims, _ := c.ownClaims(ctx, ws)
		for _, cl := range claims {
			_ = c.removeClaims(ctx, cl.Name)
		}
	})
	return ws
}

func open(t *testing.T, c *Cluster, opts Options) *Sandbox {
	t.Helper()
	sb, err := c.Open(context.WithoutCancel(t.Context()), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// execOutput runs argv in the pod through an exec of its own (not a
// session), and returns its stdout.
func execOutput(ctx context.Context, c *Cluster, pod string, argv ...string) (string, error) {
	ex, err := c.executor(pod, argv, false, true)
	if err != nil {
		return "", err
	}
	var out, errb strings.Builder
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb})
	if err != nil {
		return out.String(), fmt.Errorf("%v: %w (stderr %q)", argv, err, errb.String())
	}
	return out.String(), nil
}

func mustRun(t *testing.T, sb sandbox.Sandbox, shell string) string {
	t.Helper()
	var out, errb strings.Builder
	res, err := sb.Run(t.Context(), sandbox.Command{Shell: shell, Stdout: &out, Stderr: &errb})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: exit %d, %v; stderr %q", shell, res.ExitCode, err, errb.String())
	}
	return out.String()
}

func TestConformance(t *testing.T) {
	c := testCluster(t)
	opts := testOptions(t, workspace(t, c))
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return open(t, c, opts) }, sandboxtest.WorkspaceNotShared())
}

// listScript prints every process of the pod but PID 1 and itself, one
// "pid cmdline" a line.
const listScript = `for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] || [ "$p" = $$ ] && continue
c=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue; [ -n "$c" ] && echo "$p $c"; done; :`

func TestInterruptLeavesNoProcessInThePod(t *testing.T) {
	c := testCluster(t)
	sb := open(t, c, testOptions(t, workspace(t, c)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	shell := `setsid sleep 301 & (sleep 302 &) ; nohup sleep 303 >/dev/null 2>&1 & env -u SHIRO_CMD sleep 304 &
(setsid env -u SHIRO_CMD sh -c 'sleep 305 & sleep 306' &)
echo started; sleep 300`
	done := startRun(t, ctx, sb, shell)
	pod := sb.Pod()
	waitProcs(t, c, pod, func(ps []string) bool { return countSleeps(ps) == 7 }, "the 7 sleeps running")
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of the cancel")
	}
	// The session is still open: its helper serve may run; nothing else.
	waitProcs(t, c, pod, func(ps []string) bool {
		for _, p := range ps {
			if !strings.Contains(p, "helper serve") && !strings.Contains(p, "helper reap") {
				return false
			}
		}
		return true
	}, "no process but the session's helper and its reapers")
}

// waitProcs lists the pod's processes through execs of their own until
// cond holds (or fails the test after a generous deadline).
func waitProcs(t *testing.T, c *Cluster, pod string, cond func([]string) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := execOutput(t.Context(), c, pod, "sh", "-c", listScript)
		if err != nil {
			t.Fatal(err)
		}
		ps := strings.Split(strings.TrimSpace(out), "\n")
		if len(ps) == 1 && ps[0] == "" {
			ps = nil
		}
		if cond(ps) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %s; processes: %q", what, ps)
		}
	}
}

func countSleeps(ps []string) int {
	n := 0
	for _, p := range ps {
		if f := strings.Fields(p); len(f) == 3 && f[1] == "sleep" && strings.HasPrefix(f[2], "30") {
			n++
		}
	}
	return n
}

// startRun runs shell in the background until it prints "started" and
// returns what Run then returns: its error, or one when the command
// ended by itself with exit 0.
func startRun(t *testing.T, ctx context.Context, sb sandbox.Sandbox, shell string) <-chan error {
	t.Helper()
	out := sandboxtest.NewBuffer("started")
	done := make(chan error, 1)
	go func() {
		res, err := sb.Run(ctx, sandbox.Command{Shell: shell, Stdout: out})
		if err == nil && res.ExitCode == 0 {
			err = errors.New("the command ended by itself")
		}
		done <- err
	}()
	select {
	case <-out.Seen():
	case err := <-done:
		t.Fatalf("the command ended before it started: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the command did not start within a minute")
	}
	return done
}

func TestPodIsWhatShiroMakes(t *testing.T) {
	c := testCluster(t)
	opts := testOptions(t, workspace(t, c))
	sb := open(t, c, opts)
	pod, err := c.cs.CoreV1().Pods(c.ns).Get(t.Context(), sb.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("read back from the API server", func(t *testing.T) {
		s := pod.Spec
		if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
			t.Error("the service account token is mounted")
		}
		if s.HostNetwork || s.HostPID || s.HostIPC || s.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("host namespaces %v %v %v, restart %s", s.HostNetwork, s.HostPID, s.HostIPC, s.RestartPolicy)
		}
		for _, ctr := range append(s.InitContainers, s.Containers...) {
			sc := ctr.SecurityContext
			switch {
			case sc == nil:
				t.Fatalf("%s: no security context", ctr.Name)
			case sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
				t.Errorf("%s: capabilities %+v, want all dropped", ctr.Name, sc.Capabilities)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s: privilege escalation allowed", ctr.Name)
			case sc.RunAsUser == nil || *sc.RunAsUser != int64(opts.UID) || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
				t.Errorf("%s: runs as %v (non-root %v), want %d", ctr.Name, sc.RunAsUser, sc.RunAsNonRoot, opts.UID)
			case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
				t.Errorf("%s: seccomp %+v", ctr.Name, sc.SeccompProfile)
			}
		}
		lim := s.Containers[0].Resources.Limits
		if lim.Memory().Value() != opts.Memory || lim.Cpu().MilliValue() != 1000 {
			t.Errorf("limits %v %v", lim.Memory(), lim.Cpu())
		}
	})
	t.Run("seen from inside", func(t *testing.T) {
		out := mustRun(t, sb, `id -u; id -g; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status | tr -s ' \t' ' '
test -e /var/run/secrets/kubernetes.io/serviceaccount/token && echo token || echo no-token
: >`+helperPath+` 2>/dev/null && echo helper-written || echo helper-kept
touch `+binDir+`/planted 2>/dev/null && echo planted || echo not-planted
chmod 0777 `+helperPath+` 2>/dev/null && echo chmod || echo no-chmod
df -k /tmp | tail -n 1 | tr -s ' ' | cut -d' ' -f2`)
		want := fmt.Sprintf("%d\n%d\nCapEff: 0000000000000000\nNoNewPrivs: 1\nno-token\nhelper-kept\nnot-planted\nno-chmod\n%d\n",
			opts.UID, opts.GID, opts.Memory/4/1024)
		if out != want {
			t.Errorf("got\n%s\nwant\n%s", out, want)
		}
	})
	t.Run("what doctor checks", func(t *testing.T) {
		problems, err := sb.Check(t.Context())
		if err != nil || problems != "" {
			t.Errorf("doctor's pod check: %q %v", problems, err)
		}
	})
}

func TestIdlePodEndsAndTheClaimKeepsTheWorkspace(t *testing.T) {
	c := testCluster(t)
	opts := testOptions(t, workspace(t, c))
	opts.Idle = 3 * time.Second
	sb := open(t, c, opts)
	mustRun(t, sb, "echo kept > kept.txt && echo home > ~/home.txt")
	first, err := c.getPod(t.Context(), sb.Pod())
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	err = c.watchPod(ctx, first.Name, func(p *corev1.Pod) (bool, error) {
		if p == nil || p.UID != first.UID {
			return false, errors.New("the pod went away instead of ending")
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	})
	if err != nil {
		t.Fatalf("the idle pod did not end: %v", err)
	}
	again := open(t, c, opts)
	if got := mustRun(t, again, "cat kept.txt ~/home.txt"); got != "kept\nhome\n" {
		t.Errorf("after the idle stop: %q", got)
	}
	second, err := c.getPod(t.Context(), again.Pod())
	if err != nil {
		t.Fatal(err)
	}
	if second.UID == first.UID {
		t.Error("the session used the pod that had ended")
	}
}

func TestDeletedPodIsMadeAgainWithinASession(t *testing.T) {
	c := testCluster(t)
	sb := open(t, c, testOptions(t, workspace(t, c)))
	mustRun(t, sb, "echo x > before")
	first, err := c.getPod(t.Context(), sb.Pod())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.deletePod(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	// The channel sees its exec end; a call may fail with it, and the
	// next makes the pod again.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var out strings.Builder
		res, err := sb.Run(t.Context(), sandbox.Command{Shell: "cat before", Stdout: &out})
		if err == nil && res.ExitCode == 0 {
			if out.String() != "x\n" {
				t.Errorf("after the pod was made again: %q", out.String())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no working call after the pod was deleted: %v", err)
		}
	}
	second, err := c.getPod(t.Context(), sb.Pod())
	if err != nil || second.UID == first.UID {
		t.Errorf("no new pod: %v", err)
	}
}

func forgedPod(t *testing.T, c *Cluster, name string) *corev1.Pod {
	t.Helper()
	p, err := c.cs.CoreV1().Pods(c.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeEgress answers every proxied request itself, naming the host asked for.
type fakeEgress struct{}

func (fakeEgress) Serve(l net.Listener) error {
	return http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "proxied %s", r.Host)
	}))
}

func (fakeEgress) Register(sandbox.Caller) (string, func() []string) {
	return "tok", func() []string { return nil }
}

func TestAskModeConnectionsGoThroughTheExec(t *testing.T) {
	c := testCluster(t)
	opts := testOptions(t, workspace(t, c))
	opts.Network, opts.Egress = sandbox.NetworkAsk, fakeEgress{}
	sb := open(t, c, opts)
	out := mustRun(t, sb, "curl -sS --max-time 20 http://example.test/path")
	if out != "proxied example.test" {
		t.Errorf("through the proxy: %q", out)
	}
	pod, err := c.getPod(t.Context(), sb.Pod())
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[LabelNetwork] != closedNetwork {
		t.Errorf("the ask-mode pod is not labelled for the closing policy: %v", pod.Labels)
	}
	if _, err := c.cs.NetworkingV1().NetworkPolicies(c.ns).Get(t.Context(), policyName, metav1.GetOptions{}); err != nil {
		t.Errorf("the namespace's closing policy: %v", err)
	}
}

func TestManageTouchesOnlyThisUsersObjects(t *testing.T) {
	mine := testCluster(t)
	theirs := testCluster(t) // another key: another user's shiro
	ws := workspace(t, mine)
	other := workspace(t, theirs)
	sbMine := open(t, mine, testOptions(t, ws))
	sbTheirs := open(t, theirs, testOptions(t, other))
	// A pod that copies the labels and annotations of mine under another name.
	real, err := mine.getPod(t.Context(), sbMine.Pod())
	if err != nil {
		t.Fatal(err)
	}
	forged := real.DeepCopy()
	forged.ObjectMeta = metav1.ObjectMeta{Name: real.Name + "-forged", Labels: real.Labels, Annotations: real.Annotations}
	forged.Spec.NodeName = ""
	if _, err := mine.cs.CoreV1().Pods(mine.ns).Create(t.Context(), forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = mine.cs.CoreV1().Pods(mine.ns).Delete(context.Background(), forged.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	})

	list, err := mine.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list {
		names = append(names, p.Pod)
	}
	if strings.Join(names, " ") != sbMine.Pod() {
		t.Errorf("ls lists %q, want only %s", names, sbMine.Pod())
	}
	if err := mine.Remove(t.Context(), sbTheirs.Pod()); err == nil {
		t.Error("rm of another user's pod did not refuse")
	}
	if _, err := mine.Prune(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{sbTheirs.Pod(), forged.Name} {
		if _, err := mine.getPod(t.Context(), name); err != nil {
			t.Errorf("prune touched %s: %v", name, err)
		}
	}
	if _, err := mine.cs.CoreV1().PersistentVolumeClaims(mine.ns).Get(t.Context(), sbTheirs.Claim(), metav1.GetOptions{}); err != nil {
		t.Errorf("another user's claim: %v", err)
	}

	// rm removes mine with its claim (once the forged pod, which mounts
	// it too, is gone: a claim in use is kept).
	if err := mine.deletePod(t.Context(), forgedPod(t, mine, forged.Name)); err != nil {
		t.Fatal(err)
	}
	sbMine.Close()
	if err := mine.Remove(t.Context(), sbMine.Pod()); err != nil {
		t.Fatal(err)
	}
	if _, err := mine.getPod(t.Context(), sbMine.Pod()); err == nil {
		t.Error("rm left the pod")
	}
	pvc, err := mine.cs.CoreV1().PersistentVolumeClaims(mine.ns).Get(t.Context(), sbMine.Claim(), metav1.GetOptions{})
	if err == nil && pvc.DeletionTimestamp == nil {
		t.Error("rm left the claim")
	}
}

func TestShellIsALoginShellInTheWorkspace(t *testing.T) {
	c := testCluster(t)
	ws := workspace(t, c)
	opts := testOptions(t, ws)
	opts.Env = []string{"SHIRO_TEST_SECRET=it's a\nsecret"}
	var urls urlLog
	c.cfg.Wrap(urls.wrap)
	sb := open(t, c, opts)

	// The input stays open until the shell has exited, as a terminal's
	// would; the pty echoes it, so the check looks for what only running
	// it prints.
	in, typing := io.Pipe()
	defer typing.Close()
	go func() {
		_, _ = io.WriteString(typing, `printf '[%s %s %s %s %s]\n' "$(id -u)" "$PWD" "$TERM" "$((6*7))" "$(printf %s "$SHIRO_TEST_SECRET" | tr '\n' _)"; ls /tmp; exit 3`+"\n")
	}()
	var out sandboxtest.Buffer
	resize := make(chan sandbox.TermSize, 1)
	resize <- sandbox.TermSize{Height: 30, Width: 100}
	code, err := sb.Shell(t.Context(), sandbox.ShellOptions{In: in, Out: &out, Term: "xterm", Size: sandbox.TermSize{Height: 24, Width: 80}, Resize: resize})
	if err != nil || code != 3 {
		t.Fatalf("shell: exit %d, %v; output %q", code, err, out.String())
	}
	uid, _ := testenv.SandboxUser()
	want := fmt.Sprintf("[%d %s xterm 42 it's a_secret]", uid, ws)
	if !strings.Contains(out.String(), want) {
		t.Errorf("the shell printed %q, want %q in it", out.String(), want)
	}
	if strings.Contains(out.String(), "shiro-shell.") {
		t.Errorf("the file that carried the session's environment is still in /tmp: %q", out.String())
	}
	// The value never travelled in an exec request's URL (which API
	// servers log); the shell's own request was seen.
	var shellSeen bool
	for _, u := range urls.list() {
		if strings.Contains(u, "secret") {
			t.Errorf("a request's URL holds the value: %s", u)
		}
		shellSeen = shellSeen || strings.Contains(u, "SHIRO_SHELL_ENV")
	}
	if !shellSeen {
		t.Errorf("no exec request of the shell among %q", urls.list())
	}
}

// urlLog records the URL of every request a cluster connection makes.
type urlLog struct {
	mu   sync.Mutex
	urls []string
}

func (l *urlLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.urls = append(l.urls, r.URL.String())
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (l *urlLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.urls)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestKillFallback runs what the session falls back to when its helper
// does not confirm a kill: a fresh exec of the helper's kill of the
// session, which ends its processes and leaves the pod; and when that
// exec fails too (here: a session the helper refuses), the pod's deletion.
func TestKillFallback(t *testing.T) {
	c := testCluster(t)
	sb := open(t, c, testOptions(t, workspace(t, c)))
	pod := sb.Pod()
	first, err := c.getPod(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	ended := func(done <-chan error) error {
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Minute):
			t.Fatal("Run did not return within two minutes of the kill")
			return nil
		}
	}

	done := startRun(t, context.WithoutCancel(t.Context()), sb, "echo started; (setsid sleep 307 &); sleep 308")
	waitProcs(t, c, pod, func(ps []string) bool { return countSleeps(ps) == 2 }, "the 2 sleeps running")
	sb.conn.Lock()
	kill := sb.killer()
	sb.conn.Unlock()
	kill(t.Context())
	waitProcs(t, c, pod, func(ps []string) bool { return countSleeps(ps) == 0 }, "no sleep left")
	if err := ended(done); err != nil {
		t.Logf("the killed command: %v", err)
	}
	if p, err := c.getPod(t.Context(), pod); err != nil || p.UID != first.UID || p.DeletionTimestamp != nil {
		t.Fatalf("the helper's kill touched the pod: %v", err)
	}
	// The kill took the session's channel with it; the next command opens
	// another on the same pod.
	if out := mustRun(t, sb, "echo again"); out != "again\n" || sb.Pod() != pod {
		t.Errorf("after the kill: %q on pod %s, want again on %s", out, sb.Pod(), pod)
	}

	done = startRun(t, context.WithoutCancel(t.Context()), sb, "echo started; sleep 309")
	sb.killWith("not a session!", pod)(t.Context())
	if _, err := c.getPod(t.Context(), pod); err == nil {
		t.Error("a failed kill left the pod")
	}
	if err := ended(done); err == nil || !strings.Contains(err.Error(), "ended or was deleted") {
		t.Errorf("the command on the deleted pod: %v", err)
	}
}
