package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools"
)

// DefaultTimeout bounds each server's start: connecting and listing its
// tools.
const DefaultTimeout = 30 * time.Second

// Where a server runs.
const (
	WhereHost    = "host"
	WhereSandbox = "sandbox"
)

// Errors recorded for servers that are not started.
var (
	// ErrProjectRemote: a remote server declared by the project's config.
	ErrProjectRemote = errors.New("remote servers in the project's config are ignored; declare it in your own config")
	// ErrNoSandbox: a project stdio server in a session without a sandbox.
	ErrNoSandbox = errors.New("servers from the project's config run only inside the sandbox, and this session has none (--no-sandbox)")
	// ErrShadowed: the project declares a server the user's config also
	// declares.
	ErrShadowed = errors.New("your own config declares a server of this name; the project's is ignored")
)

// Server is one declared server.
type Server struct {
	Name string
	// Config is the server's JSON object from the config file.
	Config json.RawMessage
	// Project says the project's config declared it: a stdio server then
	// runs inside the sandbox and a remote one is refused.
	Project bool
}

// Servers lists the user's and the project's servers, each group sorted by
// name, the user's first.
func Servers(user, project map[string]json.RawMessage) []Server {
	out := make([]Server, 0, len(user)+len(project))
	for n, raw := range user {
		out = append(out, Server{Name: n, Config: raw})
	}
	for n, raw := range project {
		out = append(out, Server{Name: n, Config: raw, Project: true})
	}
	slices.SortFunc(out, func(a, b Server) int {
		if a.Project != b.Project {
			if a.Project {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// ServerStatus is what the manager knows about one server.
type ServerStatus struct {
	Name string
	// Project says the project's config declared the server.
	Project bool
	// Where is WhereHost or WhereSandbox for a server that runs, "" for
	// one that never does (a bad entry, a refused project server).
	Where string
	// Transport is TransportStdio, TransportHTTP or TransportSSE ("" when
	// the entry could not be read).
	Transport string
	// Connecting is true until the server connected or failed.
	Connecting bool
	// Tools are the names the server's tools are offered under.
	Tools []string
	// Skipped are tools that cannot be offered (the name is too long for
	// the providers, or two names clash once made valid).
	Skipped []string
	// Err says why the server is not available; nil while it connects and
	// once it is connected.
	Err error
	// Ignored says the server was deliberately not started (Err says why)
	// rather than failed.
	Ignored bool
}

// Notice is the line that reports a failed or ignored server, "" for any
// other: "mcp <server> failed: <message>" or "mcp <server>: <reason>".
func (s ServerStatus) Notice() string {
	switch {
	case s.Err == nil:
		return ""
	case s.Ignored:
		return fmt.Sprintf("mcp %s: %v", s.Name, s.Err)
	default:
		return fmt.Sprintf("mcp %s failed: %v", s.Name, s.Err)
	}
}

// Options configure a Manager.
type Options struct {
	// Workspace is the absolute workspace path: the default directory of
	// stdio servers, and the directory a project server's cwd must stay in.
	Workspace string
	// Sandbox opens the sandbox that project stdio servers run in; nil
	// means the session has none and those servers fail.
	Sandbox func(context.Context) (sandbox.Sandbox, error)
	// Timeout bounds each server's start (default DefaultTimeout). For a
	// project server it runs from the moment the sandbox is open.
	Timeout time.Duration
	// Version is shiro's version, told to servers.
	Version string
	// Environ is the environment host stdio servers inherit (default
	// os.Environ()).
	Environ []string
	// OnStatus, when set, is called once per server when it connected or
	// failed: from Start for an entry that is not started, else from the
	// manager's goroutines, possibly at the same time.
	OnStatus func(ServerStatus)
	// Sample, when set, answers the servers' sampling requests (and the
	// servers are told that shiro samples); it is called from the
	// client's goroutines while a tool call waits, possibly several at
	// once. Its error's text is what the server sees.
	Sample func(context.Context, SampleRequest) (SampleResult, error)
	// Elicit, when set, answers the servers' elicitation requests (forms
	// only), as Sample.
	Elicit func(context.Context, ElicitRequest) (ElicitResult, error)
}

// Manager connects servers and holds their sessions. Its methods are safe
// for concurrent use.
type Manager struct {
	opts   Options
	impl   *sdk.Implementation // what shiro tells servers it is
	cancel context.CancelFunc  // stops the connects in flight
	wg     sync.WaitGroup      // the connect goroutines

	mu      sync.Mutex
	servers []*server
	pending int           // outcomes not yet told through OnStatus
	done    chan struct{} // closed when pending reaches 0
	changed chan struct{} // closed (and replaced) when a server's process starts or it connects or fails

	closeOnce sync.Once
	closeErr  error
}

// server is one server's state; fields are guarded by Manager.mu.
type server struct {
	status  ServerStatus
	started time.Time // when its process started (or its remote connect began); zero before
	tools   []*Tool
	session *sdk.ClientSession
	release func() // after the session closed: stops what the transport started
}

// Start connects every server in the background, in parallel, and returns
// at once. Close stops the connects in flight and closes every server.
func Start(servers []Server, opts Options) *Manager {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	ctx, cancel := context.WithCancel(context.Background()) // the manager's lifetime
	m := &Manager{
		opts:    opts,
		impl:    &sdk.Implementation{Name: "shiro", Version: cmp.Or(opts.Version, "dev")},
		cancel:  cancel,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	user := map[string]bool{}
	var finished []ServerStatus
	m.mu.Lock()   // the connects record their outcome under it
	m.pending = 1 // Start's own report of the entries it does not start
	for _, decl := range servers {
		s := &server{status: ServerStatus{Name: decl.Name, Project: decl.Project}}
		m.servers = append(m.servers, s)
		cfg, err := m.plan(decl, user, &s.status)
		if err != nil {
			s.status.Err = err
			s.status.Ignored = errors.Is(err, ErrProjectRemote) || errors.Is(err, ErrShadowed)
			finished = append(finished, s.status)
			continue
		}
		s.status.Connecting = true
		m.pending++
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.connect(ctx, s, cfg)
		}()
	}
	m.mu.Unlock()
	if opts.OnStatus != nil {
		for _, st := range finished {
			opts.OnStatus(st)
		}
	}
	m.settle()
	return m
}

// settle counts one outcome as told (OnStatus has returned): the last
// closes done, so that Wait returns only after every OnStatus.
func (m *Manager) settle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending--
	if m.pending == 0 {
		close(m.done)
	}
}

// plan reads a declaration and decides where the server runs; an error
// means it is not started.
func (m *Manager) plan(decl Server, user map[string]bool, st *ServerStatus) (Config, error) {
	if !decl.Project {
		user[decl.Name] = true // even a broken entry keeps the project's of its name out
	}
	if err := ValidName(decl.Name); err != nil {
		return Config{}, err
	}
	cfg, err := ParseConfig(decl.Config)
	if err != nil {
		return Config{}, err
	}
	st.Transport = cfg.Transport()
	if !decl.Project {
		st.Where = WhereHost
		return cfg, nil
	}
	switch {
	case user[decl.Name]:
		return Config{}, ErrShadowed
	case cfg.Transport() != TransportStdio:
		return Config{}, ErrProjectRemote
	case m.opts.Sandbox == nil:
		return Config{}, ErrNoSandbox
	}
	st.Where = WhereSandbox
	return cfg, nil
}

// connect starts one server and records the outcome.
func (m *Manager) connect(ctx context.Context, s *server, cfg Config) {
	cs, release, list, skipped, err := m.open(ctx, s.status.Name, s.status.Where, cfg, func() {
		m.mu.Lock()
		s.started = time.Now()
		close(m.changed)
		m.changed = make(chan struct{})
		m.mu.Unlock()
	})
	m.mu.Lock()
	s.status.Connecting = false
	close(m.changed)
	m.changed = make(chan struct{})
	if err != nil {
		s.status.Err = err
	} else {
		s.session, s.release, s.tools = cs, release, list
		for _, t := range list {
			s.status.Tools = append(s.status.Tools, t.Name())
		}
		s.status.Skipped = skipped
	}
	st := s.status
	m.mu.Unlock()
	if m.opts.OnStatus != nil {
		m.opts.OnStatus(st)
	}
	m.settle()
}

// open connects to one server and lists its tools. On failure everything
// it started is stopped.
func (m *Manager) open(ctx context.Context, name, where string, cfg Config, started func()) (*sdk.ClientSession, func(), []*Tool, []string, error) {
	var sb sandbox.Sandbox
	root := m.opts.Workspace
	if where == WhereSandbox {
		var err error
		if sb, err = m.opts.Sandbox(ctx); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("open the sandbox: %w", err)
		}
		if p := sb.Info().Workspace; p != "" {
			root = p // the workspace as the server sees it
		}
	}
	// Some transports tie the connection to the context their Connect is
	// given (the SSE stream): it must last as long as the session, and the
	// start's deadline must reach it only while the server starts.
	connCtx, connCancel := context.WithCancel(ctx)
	startCtx, cancel := context.WithTimeout(connCtx, m.opts.Timeout)
	defer cancel()
	stopDeadline := context.AfterFunc(startCtx, connCancel)
	tr, err := m.transport(startCtx, sb, cfg)
	if err != nil {
		connCancel()
		return nil, nil, nil, nil, err
	}
	started()
	// fail explains err by what is known of the server's end, then stops
	// what was started: explained first, so that the server's own exit is
	// told apart from the stop.
	fail := func(stage string, err error) (*sdk.ClientSession, func(), []*Tool, []string, error) {
		hung := errors.Is(startCtx.Err(), context.DeadlineExceeded)
		if hung {
			what := "answer the initialize request"
			if stage == stageList {
				what = "list its tools"
			}
			err = fmt.Errorf("the server hangs: it started but did not %s within %s", what, m.opts.Timeout)
		} else {
			err = fmt.Errorf("%s: %w", stage, err)
		}
		err = tr.explain(err, !hung)
		connCancel()
		tr.release()
		return nil, nil, nil, nil, err
	}
	cs, err := m.newClient(name, root).Connect(connCtx, tr.transport, &sdk.ClientSessionOptions{ProtocolVersion: clientProtocol})
	if err != nil {
		return fail(stageInit, err)
	}
	var list []*Tool
	var skipped []string
	seen := map[string]bool{}
	for t, err := range cs.Tools(startCtx, nil) {
		if err != nil {
			_ = cs.Close()
			return fail(stageList, err)
		}
		tool := newTool(name, t, cs)
		if len(tool.Name()) > maxNameLen || seen[tool.Name()] {
			skipped = append(skipped, t.Name)
			continue
		}
		seen[tool.Name()] = true
		list = append(list, tool)
	}
	if !stopDeadline() { // the deadline passed as the listing ended
		_ = cs.Close()
		return fail(stageList, startCtx.Err())
	}
	return cs, func() { tr.release(); connCancel() }, list, skipped, nil
}

// The stages of a server's start, as its errors name them.
const (
	stageInit = "initialize"
	stageList = "list tools"
)

// started is a transport and what to do around it.
type started struct {
	transport sdk.Transport
	// release stops what the transport started once the session is closed
	// (or the connect failed).
	release func()
	// explain puts what is known of the server's end first (a line of its
	// stdout that is not JSON-RPC, its exit status) and its stderr last;
	// waitExit gives a server whose pipe broke a moment to be seen exit.
	explain func(err error, waitExit bool) error
}

func (m *Manager) transport(ctx context.Context, sb sandbox.Sandbox, cfg Config) (started, error) {
	switch {
	case cfg.Transport() != TransportStdio:
		return remoteTransport(cfg), nil
	case sb != nil:
		return sandboxTransport(ctx, sb, cfg, m.opts.Workspace)
	default:
		return hostTransport(cfg, m.opts.Workspace, m.opts.Environ)
	}
}

// Done is closed when every server connected or failed, and OnStatus has
// returned for each.
func (m *Manager) Done() <-chan struct{} { return m.done }

// Wait waits until every server connected or failed (and OnStatus has
// returned for each), or ctx ends.
func (m *Manager) Wait(ctx context.Context) error {
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitStarted waits until every server connected or failed, or each one
// still connecting has had grace since its process started (one whose
// sandbox is still opening is waited for), or ctx ends. A session's first
// turn waits so: a server that starts at once is in it, one that hangs
// does not hold it.
func (m *Manager) WaitStarted(ctx context.Context, grace time.Duration) error {
	for {
		m.mu.Lock()
		changed := m.changed
		var next time.Time // the earliest grace still running
		waiting := false
		for _, s := range m.servers {
			if !s.status.Connecting {
				continue
			}
			if s.started.IsZero() {
				waiting = true
				continue
			}
			if end := s.started.Add(grace); time.Until(end) > 0 {
				waiting = true
				if next.IsZero() || end.Before(next) {
					next = end
				}
			}
		}
		m.mu.Unlock()
		if !waiting {
			return nil
		}
		var timer <-chan time.Time
		var t *time.Timer
		if !next.IsZero() {
			t = time.NewTimer(time.Until(next))
			timer = t.C
		}
		var err error
		select {
		case <-m.done:
			return nil
		case <-changed:
		case <-timer:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if t != nil {
			t.Stop()
		}
		if err != nil {
			return err
		}
	}
}

// Status describes every server, in the order they were given.
func (m *Manager) Status() []ServerStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ServerStatus, len(m.servers))
	for i, s := range m.servers {
		out[i] = s.status
		out[i].Tools = slices.Clone(s.status.Tools)
		out[i].Skipped = slices.Clone(s.status.Skipped)
	}
	return out
}

// Tools are the tools of the servers connected so far, server by server.
func (m *Manager) Tools() []tools.Tool {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []tools.Tool
	for _, s := range m.servers {
		for _, t := range s.tools {
			out = append(out, t)
		}
	}
	return out
}

// Close stops the connects in flight, then closes every server's session
// and stops its process (a stdio server on the host is asked to exit, then
// signalled; one in the sandbox has its process tree killed). Its tools
// fail from then on. Close may be called again.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		m.cancel()
		m.wg.Wait()
		m.mu.Lock()
		var open []*server
		for _, s := range m.servers {
			if s.session != nil {
				open = append(open, s)
			}
		}
		m.mu.Unlock()
		errs := make([]error, len(open))
		var wg sync.WaitGroup
		for i, s := range open {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.session.Close(); err != nil && !exitError(err) {
					errs[i] = fmt.Errorf("close MCP server %s: %w", s.status.Name, err)
				}
				s.release()
			}()
		}
		wg.Wait()
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}

// exitError reports the errors a server's ending gives (an exit status or
// a signal, a pipe already closed): expected when it is stopped.
func exitError(err error) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) || errors.Is(err, os.ErrProcessDone) || errors.Is(err, os.ErrClosed) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, sdk.ErrConnectionClosed) || strings.Contains(err.Error(), "already closed")
}
