package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
	"github.com/shiroagent/shiro/sandbox/owner"
)

// Sandbox is a session on the workspace's pod.
type Sandbox struct {
	c      *Cluster
	opts   Options
	helper helperBinary
	plan   plan
	base   string // session id prefix
	env    []string
	logs   io.Writer

	mu     sync.Mutex
	pod    string // the pod the session last used
	ch     *channel
	tun    *tunnel // the egress tunnel of ch, in ask mode
	seq    int
	closed bool
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// Open finds or makes the workspace's pod and opens a session on it.
func (c *Cluster) Open(ctx context.Context, opts Options) (*Sandbox, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("sandbox options: %w", err)
	}
	env, err := opts.ResolveEnv(opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	h, err := loadHelper(opts.HelperBinary)
	if err != nil {
		return nil, err
	}
	wsID, err := owner.WorkspaceID(opts.Workspace)
	if err != nil {
		return nil, err
	}
	spec := podSpec{
		Workspace:   opts.Workspace,
		WorkspaceID: wsID,
		Image:       opts.Image,
		Helper:      h.hash,
		Chunks:      len(h.chunks()),
		Memory:      opts.Memory,
		CPUs:        opts.CPUs,
		Network:     opts.Network,
		IdleTimeout: opts.Idle,
		UID:         opts.UID,
		GID:         opts.GID,
		UserName:    opts.UserName,
	}
	s := &Sandbox{c: c, opts: opts, helper: h, plan: newPlan(spec, c.key, c.ns, opts.Version), base: suffix() + suffix()[:4],
		env: sessionEnv(env), logs: io.Discard}
	s.mu.Lock()
	err = s.connect(ctx)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// sessionEnv is what the session's helper adds to the pod's environment:
// the user's entries, and SHIRO_PATH when they set PATH (the login
// shells' profile script then keeps it; otherwise it keeps the image's).
func sessionEnv(env []string) []string {
	out := append([]string(nil), env...)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			out = append(out, "SHIRO_PATH="+v)
		}
	}
	return out
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Sandbox) session() string { return fmt.Sprintf("%s-%d", s.base, s.seq) }

// connect makes sure the pod runs and opens a fresh channel (and tunnel).
// Callers hold s.mu.
func (s *Sandbox) connect(ctx context.Context) error {
	name, err := s.c.ensurePod(ctx, s.plan, s.helper, s.opts)
	if err != nil {
		return err
	}
	s.pod = name
	s.seq++
	ch, err := s.c.openChannel(ctx, name, s.session(), s.env, s.logs)
	if err != nil {
		return err
	}
	s.ch = ch
	if s.opts.Network == sandbox.NetworkAsk && s.opts.Egress != nil {
		tun, err := s.c.openTunnel(ctx, name, s.opts, s.logs, ch)
		if err != nil {
			ch.close()
			s.ch = nil
			return err
		}
		s.tun = tun
	}
	return nil
}

// channel returns a working channel, reconnecting when the last one broke
// (the pod ended, was deleted, or the helper died).
func (s *Sandbox) channel(ctx context.Context) (*channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, sandbox.ErrClosed
	}
	if s.ch != nil && !s.ch.broken() {
		return s.ch, nil
	}
	if s.ch != nil {
		s.ch.close()
		s.ch = nil
	}
	s.closeTunnel()
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s.ch, nil
}

// closeTunnel ends the egress tunnel, if any. Callers hold s.mu.
func (s *Sandbox) closeTunnel() {
	if s.tun != nil {
		s.tun.close()
		s.tun = nil
	}
}

// egressEnv is the proxy environment of a command in ask mode, with a
// token naming the tool call ctx carries; release forgets the token once
// the command is done. Nil without a tunnel.
func (s *Sandbox) egressEnv(ctx context.Context) (env []string, release func() []string) {
	s.mu.Lock()
	tun, pod := s.tun, s.pod
	s.mu.Unlock()
	if tun == nil {
		return nil, nil
	}
	caller, _ := sandbox.CallerFrom(ctx)
	token, release := s.opts.Egress.Register(caller)
	host := pod
	if len(host) > 63 {
		host = host[:63]
	}
	return append(sandbox.ProxyEnv(tun.t.Port, token, host), tun.trust...), release
}

// Run implements sandbox.Sandbox.
func (s *Sandbox) Run(ctx context.Context, cmd sandbox.Command) (res sandbox.Result, err error) {
	if err := cmd.Validate(); err != nil {
		return sandbox.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Result{Interrupted: true}, err
	}
	ch, err := s.channel(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	if env, release := s.egressEnv(ctx); env != nil {
		cmd.Env = append(env, cmd.Env...)
		defer func() { res.Notices = append(res.Notices, release()...) }()
	}
	res, err = ch.client.Run(ctx, cmd)
	if errors.Is(err, helper.ErrKillTimeout) {
		// The helper did not confirm the kill in time: kill the session's
		// processes through a fresh exec, and drop the channel.
		s.forceKill(ctx, ch)
		return res, ctx.Err()
	}
	if errors.Is(err, helper.ErrChannelClosed) && ctx.Err() == nil {
		s.mu.Lock()
		pod := s.pod
		s.mu.Unlock()
		return res, fmt.Errorf("the sandbox pod %s ended or was deleted while the command ran: %w", pod, err)
	}
	return res, err
}

// forceKill is the fallback when the channel cannot confirm a kill: a fresh
// exec of the helper's kill, and if even that fails, the pod is deleted
// (the next command makes another; the claim stays).
func (s *Sandbox) forceKill(ctx context.Context, ch *channel) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	s.mu.Lock()
	session, pod := s.session(), s.pod
	if s.ch == ch {
		s.ch = nil
		s.closeTunnel()
	}
	s.mu.Unlock()
	code, err := s.c.Exec(ctx, pod, []string{helperPath, "helper", "kill", "--session", session})
	if err != nil || code != 0 {
		if p, gerr := s.c.getPod(ctx, pod); gerr == nil {
			_ = s.c.deletePod(ctx, p)
		}
	}
	ch.close()
}

// Info implements sandbox.Sandbox.
func (s *Sandbox) Info() sandbox.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	engine := s.c.context
	if engine == "" {
		engine = s.c.server
	}
	engine += " (namespace " + s.c.ns + ")"
	return sandbox.Info{Kind: "kubernetes", Workspace: s.opts.Workspace, Image: s.opts.Image, Container: s.pod, Helper: helperPath, Copy: true, Engine: engine}
}

// Pod is the name of the pod the session last used.
func (s *Sandbox) Pod() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pod
}

// Claim is the name of the workspace's claim.
func (s *Sandbox) Claim() string { return s.plan.claim }

// Close implements sandbox.Sandbox: the helper kills every process this
// session started. The pod stays for the next session (until it is idle).
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.ch != nil {
		s.ch.close()
		s.ch = nil
	}
	s.closeTunnel()
	return nil
}

// channel is one long-lived exec of `helper serve` carrying every command
// of a session over its stdin and stdout.
type channel struct {
	client *helper.Client
	st     *stream
}

// openChannel starts `helper serve` in the pod and connects a client to it.
// The session's environment goes first on the stream, as one line: the
// exec API has no environment of its own, and its command line is in every
// API server's audit log.
func (c *Cluster) openChannel(ctx context.Context, pod, session string, env []string, stderr io.Writer) (*channel, error) {
	st, err := c.startStream(ctx, pod, []string{helperPath, "helper", "serve", "--session", session, "--env-stdin"}, stderr)
	if err != nil {
		return nil, fmt.Errorf("start the command channel in %s: %w", pod, err)
	}
	line, err := json.Marshal(append([]string{}, env...))
	if err == nil {
		_, err = st.stdin.Write(append(line, '\n'))
	}
	if err != nil {
		st.close(0)
		return nil, fmt.Errorf("start the command channel in %s: %w", pod, err)
	}
	return &channel{client: helper.NewClient(st.stdout, stdinCloser{st}), st: st}, nil
}

// close ends the session: the helper sees EOF on its stdin, kills every
// process the session started and exits.
func (ch *channel) close() {
	ch.st.close(3 * time.Second)
	ch.client.Close() //nolint:errcheck // its stream is closed; nothing new to report
}

// broken reports whether the channel can no longer carry commands.
func (ch *channel) broken() bool {
	select {
	case <-ch.client.Done():
		return true
	default:
		return false
	}
}

// stdinCloser turns the client's Close into a half-close of the exec.
type stdinCloser struct{ st *stream }

func (w stdinCloser) Write(p []byte) (int, error) { return w.st.stdin.Write(p) }
func (w stdinCloser) Close() error                { return w.st.closeStdin() }
