package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/trust"
	"github.com/shiroagent/shiro/orchestrator/worktree"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/mcp"
)

// DoctorOptions are the inputs of `shiro doctor`.
type DoctorOptions struct {
	Sandbox *SandboxFlags
	// HTTPClient asks the provider's endpoint; nil means one with a short
	// timeout.
	HTTPClient *http.Client
	// NoMCP skips starting the MCP servers.
	NoMCP bool
	// Worktree checks the existing worktree agent of that name (its
	// worktree is the workspace).
	Worktree string
}

// NewCmdDoctor builds `shiro doctor`: one line per check, ✓ or ✗ with the
// fix, exit 1 when something shiro needs is missing.
func NewCmdDoctor(f *Factory, sf *SandboxFlags, runF func(*DoctorOptions) error) *cobra.Command {
	opts := &DoctorOptions{Sandbox: sf}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the Docker engine, the sandbox image, the workspace mount and the provider",
		Long: `Check what shiro needs, one line each, ✓ or ✗ with the fix:

  engine      reachable, its version and API version, rootless or not
  image       present, and what it was built from (a project Dockerfile or
              devcontainer.json is built if it changed; nothing is pulled)
  tools       bash, rg and git in the image
  workspace   a file written in the sandbox belongs to you
  container   the sandbox container is what shiro makes: your user, no
              capabilities, no-new-privileges, limits, /tmp limited
  helper      the in-sandbox helper is read-only, unreadable to commands, its processes out of their reach
  git         the sandbox works on its own copy of .git (nothing it writes
              there reaches your repository) and cannot rename it away
  others      no other container (an older shiro's, someone's docker run)
              can write the workspace
  repositories  no repository in the workspace that git on your machine
              would take from the sandbox
  worktree    the worktree agent and branch the workspace is (--worktree
              NAME checks that agent's sandbox from its checkout)
  trust       whether the project's asks (its MCP servers, its image build)
              are trusted; untrusted ones are skipped, never started
  sandbox     network and limits
  provider    an API key is set; the endpoint answers GET /models
  mcp         each configured MCP server starts (the project's in the
              sandbox) and lists its tools (--no-mcp skips this)

Exit status 1 when a check fails. The flags of the sandbox (--image,
--network, ...) and the configuration apply as for a session.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runDoctor(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.NoMCP, "no-mcp", false, "do not start the MCP servers")
	cmd.Flags().StringVar(&opts.Worktree, "worktree", "", "check the sandbox of the worktree agent NAME (shiro --worktree NAME) instead of this directory's")
	return cmd
}

// doctor prints the checks as they finish and remembers whether one failed.
type doctor struct {
	out    io.Writer
	failed bool
}

var _ sandbox.Report = (*doctor)(nil)

// OK and Fail are the backend's way to report its checks.
func (d *doctor) OK(name, format string, args ...any) { d.ok(name, format, args...) }
func (d *doctor) Fail(name, problem, fix string)      { d.fail(name, problem, fix) }

func (d *doctor) ok(name, format string, args ...any) {
	fmt.Fprintf(d.out, "✓ %-9s %s\n", name, fmt.Sprintf(format, args...))
}

// fail prints a failed check; fix says what to do about it.
func (d *doctor) fail(name, problem, fix string) {
	d.failed = true
	line := "✗ " + fmt.Sprintf("%-9s ", name) + strings.TrimRight(problem, ".")
	if fix != "" {
		line += " — fix: " + fix
	}
	fmt.Fprintln(d.out, line)
}

func runDoctor(ctx context.Context, f *Factory, opts *DoctorOptions) error {
	agent, w, err := f.doctorWorkspace(opts)
	if err != nil {
		return err
	}
	defer w.Close()
	ws := w.Path()
	cfg, paths, err := f.loadConfigAsked(w, opts.Sandbox, nil)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	d := &doctor{out: f.Out}
	if agent != nil {
		d.ok("worktree", "the worktree agent %s on branch %s, made from %s at %.12s", termsafe.Name(agent.Name), termsafe.Name(agent.Branch), termsafe.Name(agent.Checkout), agent.Base)
	}
	// An untrusted project's servers and image are withheld before any
	// check could start or build them.
	state, _ := f.gateTrust(&cfg, paths, w, opts.Sandbox)
	d.reportTrust(state)
	sc := f.sandboxConfig(cfg, paths, ws, opts.Sandbox)
	sc.Opened = w
	if sc.NoSandbox {
		d.ok("sandbox", "off (--no-sandbox): commands run on this machine without isolation; the engine is not needed")
	} else {
		d.checkSandbox(ctx, sc)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	d.checkProvider(ctx, cfg, client)
	d.checkCheckpoints(paths.DataDir)
	if !opts.NoMCP {
		d.checkMCP(ctx, cfg, sc, f.Version)
	}
	if d.failed {
		return errSilent(1)
	}
	return nil
}

// doctorWorkspace opens the workspace doctor checks: the current
// directory, or the worktree of the agent --worktree names (which must
// exist). The agent is the worktree agent the workspace belongs to, if
// any.
func (f *Factory) doctorWorkspace(opts *DoctorOptions) (*worktree.Agent, *workspace.Workspace, error) {
	dir, err := f.workspace()
	if err != nil {
		return nil, nil, err
	}
	paths, err := config.ResolvePaths(f.LookupEnv)
	if err != nil {
		return nil, nil, &ExitError{Code: 1, Err: err}
	}
	folder, err := f.worktreesDir(paths)
	if err != nil {
		return nil, nil, &ExitError{Code: 1, Err: err}
	}
	var agent *worktree.Agent
	if opts.Worktree != "" {
		if agent, err = worktree.Find(worktree.OpenOptions{Dir: dir, Name: opts.Worktree, DataDir: paths.DataDir, WorktreeDir: folder}); err != nil {
			return nil, nil, &ExitError{Code: 1, Err: err}
		}
		dir = agent.Path
	} else if paths.DataDir != "" {
		agent, _ = worktree.AgentAt(paths.DataDir, folder, dir)
	}
	w, err := workspace.Open(dir)
	return agent, w, err
}

// reportTrust says whether the project's asks are trusted. Untrusted asks
// are not a failure: they are skipped, as in a session.
func (d *doctor) reportTrust(st trust.State) {
	switch {
	case len(st.Asks) == 0:
		d.ok("trust", "the project config asks for nothing that needs trust")
	case st.Trusted:
		d.ok("trust", "trusted (%s) for %d ask(s):", st.By, len(st.Asks))
	case st.Known:
		d.ok("trust", "not trusted: the project's asks changed since you trusted it; skipped (`shiro trust` after reading them):")
		for _, l := range st.Change.Lines() {
			fmt.Fprintf(d.out, "            %s\n", l)
		}
	default:
		d.ok("trust", "not trusted; skipped (`shiro trust` or --trust-project after reading them):")
	}
	for _, a := range st.Asks {
		fmt.Fprintf(d.out, "            %s\n", a)
	}
}

// checkCheckpoints reports the size of the undo checkpoints of every
// workspace.
func (d *doctor) checkCheckpoints(dataDir string) {
	dir := orchestrator.CheckpointsDir(dataDir)
	n, err := checkpoint.Size(dir)
	if err != nil {
		d.fail("checkpoints", fmt.Sprintf("cannot read %s: %v", dir, err), "check the permissions of the data directory")
		return
	}
	d.ok("checkpoints", "%s in %s (the last 50 turns or 7 days of each workspace)", formatBytes(n), dir)
}

// doctorMCPTimeout bounds each MCP server's start in doctor: a server
// that has not answered by then is reported as hanging (sessions wait
// mcp.DefaultTimeout for it, in the background).
const doctorMCPTimeout = 10 * time.Second

// doctorMCPProgress is how often doctor names the servers it still waits
// for.
const doctorMCPProgress = 3 * time.Second

// checkMCP connects the configured MCP servers as a session would (the
// project's stdio servers in the sandbox), all at once, and reports each
// one's tools or why it is not available as soon as it is known, naming
// the servers it still waits for now and then.
func (d *doctor) checkMCP(ctx context.Context, cfg config.Config, sc orchestrator.SandboxConfig, version string) {
	d.checkMCPWithin(ctx, cfg, sc, version, doctorMCPTimeout, doctorMCPProgress)
}

func (d *doctor) checkMCPWithin(ctx context.Context, cfg config.Config, sc orchestrator.SandboxConfig, version string, timeout, every time.Duration) {
	servers := mcp.Servers(cfg.MCPServers, cfg.ProjectMCPServers)
	if len(servers) == 0 {
		return
	}
	var open func(context.Context) (sandbox.Sandbox, error)
	if !sc.NoSandbox {
		lazy := orchestrator.NewLazy(sc)
		defer lazy.Close() // after the servers (defers run last first)
		open = lazy.Get
	}
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = termsafe.Name(s.Name)
	}
	fmt.Fprintf(d.out, "… %-9s connecting %d server(s) at once: %s\n", "mcp", len(servers), strings.Join(names, ", "))
	var mu sync.Mutex // the reports come from the connecting goroutines
	report := func(st mcp.ServerStatus) {
		mu.Lock()
		defer mu.Unlock()
		d.reportMCP(st)
	}
	start := time.Now()
	m := mcp.Start(servers, mcp.Options{Workspace: sc.Workspace, Sandbox: open, Version: version, Timeout: timeout, OnStatus: report})
	defer m.Close()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-m.Done():
			return
		case <-ctx.Done():
			mu.Lock()
			d.fail("mcp", ctx.Err().Error(), "")
			mu.Unlock()
			return
		case <-tick.C:
			var waiting []string
			for _, st := range m.Status() {
				if st.Connecting {
					waiting = append(waiting, termsafe.Name(st.Name))
				}
			}
			if len(waiting) > 0 {
				mu.Lock()
				fmt.Fprintf(d.out, "… %-9s still waiting for %s (%s of at most %s)\n", "mcp", strings.Join(waiting, ", "), time.Since(start).Round(time.Second), timeout)
				mu.Unlock()
			}
		}
	}
}

// reportMCP prints one server's outcome.
func (d *doctor) reportMCP(st mcp.ServerStatus) {
	st.Name = termsafe.Name(st.Name)
	origin := "your config"
	if st.Project {
		origin = "the project's config"
	}
	switch {
	case st.Ignored:
		d.ok("mcp", "%s (%s): not started: %v", st.Name, origin, st.Err)
	case st.Err != nil:
		d.fail("mcp", fmt.Sprintf("%s (%s): %v", st.Name, origin, st.Err), "")
	default:
		where := "on the host"
		if st.Where == mcp.WhereSandbox {
			where = "in the sandbox"
		}
		d.ok("mcp", "%s (%s, %s %s): %d tools", st.Name, origin, st.Transport, where, len(st.Tools))
	}
}

// checkSandbox runs the checks of the backend the settings choose: its
// engine, the image, a sandbox and how it holds the workspace.
func (d *doctor) checkSandbox(ctx context.Context, sc orchestrator.SandboxConfig) {
	b, err := sc.LookupBackend()
	if err != nil {
		d.fail("sandbox", err.Error(), "")
		return
	}
	spec, err := sc.Spec()
	if err != nil {
		d.fail("sandbox", err.Error(), "")
		return
	}
	b.Doctor(ctx, spec, d)
	if spec.Egress != nil {
		d.ok("rules", "%d allow and %d deny rules decide the sandbox's connections before shiro asks you", len(sc.HostRules.Allow), len(sc.HostRules.Deny))
	}
}

// checkProvider checks the API key and asks the endpoint for its models.
func (d *doctor) checkProvider(ctx context.Context, cfg config.Config, client *http.Client) {
	hasKey := cfg.APIKey != ""
	switch {
	case hasKey:
		d.ok("key", "%s: an API key is set", cfg.Provider)
	case cfg.APIKeyRequired():
		err := &orchestrator.MissingKeyError{Provider: cfg.Provider}
		d.fail("key", fmt.Sprintf("%s: no API key", cfg.Provider), strings.TrimPrefix(err.Error(), fmt.Sprintf("No API key for provider %q. ", cfg.Provider)))
	default:
		d.ok("key", "%s: none set (this provider may not need one)", cfg.Provider)
	}
	endpoint := redactURL(cfg.BaseURL)
	if cfg.BaseURL == "" {
		d.fail("endpoint", "no base URL for "+cfg.Provider, "set baseURL in your config or SHIRO_BASE_URL")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.BaseURL, "/")+"/models", nil)
	if err != nil {
		d.fail("endpoint", endpoint+": "+err.Error(), "fix baseURL")
		return
	}
	if hasKey {
		switch cfg.Provider {
		case config.ProviderAnthropic:
			req.Header.Set("x-api-key", cfg.APIKey)
		default:
			req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		}
	}
	if cfg.Provider == config.ProviderAnthropic {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	resp, err := client.Do(req)
	if err != nil {
		d.fail("endpoint", endpoint+" cannot be reached: "+describeHTTPError(err, cfg.APIKey),
			"check the network, a proxy (HTTPS_PROXY) or the base URL (baseURL, SHIRO_BASE_URL)")
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		d.ok("endpoint", "%s answered GET /models (HTTP %d)", endpoint, code)
	case (code == http.StatusUnauthorized || code == http.StatusForbidden) && hasKey:
		d.fail("endpoint", fmt.Sprintf("%s refused the key (HTTP %d)", endpoint, code), "check the API key, and that it belongs to "+cfg.Provider)
	case code < 500:
		d.ok("endpoint", "%s is reachable (HTTP %d for GET /models)", endpoint, code)
	default:
		d.fail("endpoint", fmt.Sprintf("%s answered HTTP %d", endpoint, code), "the service has trouble; try again later")
	}
}

// redactURL shows an endpoint without credentials or query.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the base URL"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// describeHTTPError drops the URL (it may carry credentials) from a
// client error.
func describeHTTPError(err error, key string) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if key != "" {
		msg = strings.ReplaceAll(msg, key, "[key]")
	}
	return msg
}

// formatBytes shows a size the way the flags take it (4g, 512m).
func formatBytes(n int64) string {
	for _, u := range []struct {
		unit  string
		shift uint
	}{{"t", 40}, {"g", 30}, {"m", 20}, {"k", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
