package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
	"github.com/shiroagent/shiro/sandbox/owner"
	"github.com/shiroagent/shiro/sandbox/session"
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

	// conn's lock guards pod and seq too.
	conn *session.Conn[*channel, *tunnel]
	pod  string // the pod the session last used
	seq  int
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
		PullSecret:  opts.ImagePullSecret,
	}
	s := &Sandbox{c: c, opts: opts, helper: h, plan: newPlan(spec, c.key, c.ns, opts.Version), base: suffix() + suffix()[:4],
		env: sessionEnv(env), logs: io.Discard}
	s.conn = session.New(session.Backend[*channel, *tunnel]{
		Connect:     s.connect,
		Egress:      opts.Egress,
		Hostname:    s.hostname,
		Kill:        s.killer,
		KillTimeout: 20 * time.Second,
		Lost: func(err error) error {
			return fmt.Errorf("the sandbox pod %s ended or was deleted while the command ran%s: %w", s.pod, c.podEnd(ctx, s.pod), err)
		},
	})
	if _, err := s.conn.Channel(ctx); err != nil {
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
// Callers hold s.conn's lock.
func (s *Sandbox) connect(ctx context.Context) (*channel, *tunnel, error) {
	name, err := s.c.ensurePod(ctx, s.plan, s.helper, s.opts)
	if err != nil {
		return nil, nil, err
	}
	s.pod = name
	s.seq++
	ch, err := s.c.openChannel(ctx, name, s.session(), s.env, s.logs)
	if err != nil {
		return nil, nil, err
	}
	var tun *tunnel
	if s.opts.Network == sandbox.NetworkAsk && s.opts.Egress != nil {
		if tun, err = s.c.openTunnel(ctx, name, s.opts, s.logs, ch); err != nil {
			ch.Close()
			return nil, nil, err
		}
	}
	return ch, tun, nil
}

// hostname is the pod's hostname: its name, cut to the 63 characters of a
// DNS label. Callers hold s.conn's lock.
func (s *Sandbox) hostname() string {
	host := s.pod
	if len(host) > 63 {
		host = host[:63]
	}
	return host
}

// Run implements sandbox.Sandbox. A command whose context has ended does
// not reconnect.
func (s *Sandbox) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	if err := cmd.Validate(); err == nil && ctx.Err() != nil {
		return sandbox.Result{Interrupted: true}, ctx.Err()
	}
	return s.conn.Run(ctx, cmd)
}

// killer is the fallback when the channel cannot confirm a kill: a fresh
// exec of the helper's kill of the current session, and if even that
// fails, the pod is deleted (the next command makes another; the claim
// stays). Callers hold s.conn's lock.
func (s *Sandbox) killer() func(context.Context) { return s.killWith(s.session(), s.pod) }

// killWith is killer for a session and a pod.
func (s *Sandbox) killWith(sess, pod string) func(context.Context) {
	return func(ctx context.Context) {
		code, err := s.c.Exec(ctx, pod, []string{helperPath, "helper", "kill", "--session", sess})
		if err != nil || code != 0 {
			if p, gerr := s.c.getPod(ctx, pod); gerr == nil {
				_ = s.c.deletePod(ctx, p)
			}
		}
	}
}

// Info implements sandbox.Sandbox.
func (s *Sandbox) Info() sandbox.Info {
	s.conn.Lock()
	defer s.conn.Unlock()
	engine := s.c.context
	if engine == "" {
		engine = s.c.server
	}
	engine += " (namespace " + s.c.ns + ")"
	return sandbox.Info{Kind: sandbox.BackendKubernetes, Workspace: s.opts.Workspace, Image: s.opts.Image, Container: s.pod, Helper: helperPath, Copy: true, Engine: engine, Place: "the Kubernetes cluster " + engine}
}

// Pod is the name of the pod the session last used.
func (s *Sandbox) Pod() string {
	s.conn.Lock()
	defer s.conn.Unlock()
	return s.pod
}

// Claim is the name of the workspace's claim.
func (s *Sandbox) Claim() string { return s.plan.claim }

// Close implements sandbox.Sandbox: the helper kills every process this
// session started. The pod stays for the next session (until it is idle).
func (s *Sandbox) Close() error {
	s.conn.Close(nil)
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

// Client is the helper's client on the channel.
func (ch *channel) Client() *helper.Client { return ch.client }

// Close ends the session: the helper sees EOF on its stdin, kills every
// process the session started and exits.
func (ch *channel) Close() {
	ch.st.close(3 * time.Second)
	ch.client.Close() //nolint:errcheck // its stream is closed; nothing new to report
}

// stdinCloser turns the client's Close into a half-close of the exec.
type stdinCloser struct{ st *stream }

func (w stdinCloser) Write(p []byte) (int, error) { return w.st.stdin.Write(p) }
func (w stdinCloser) Close() error                { return w.st.closeStdin() }
