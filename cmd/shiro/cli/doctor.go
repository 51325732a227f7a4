package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/trust"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
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
	return cmd
}

// doctor prints the checks as they finish and remembers whether one failed.
type doctor struct {
	out    io.Writer
	failed bool
}

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
	w, err := f.openWorkspace()
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
	// An untrusted project's servers and image are withheld before any
	// check could start or build them.
	state, _ := f.gateTrust(&cfg, paths, ws, opts.Sandbox)
	d.reportTrust(state)
	sc := f.sandboxConfig(cfg, paths, ws, opts.Sandbox)
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

// checkMCP connects the configured MCP servers as a session would (the
// project's stdio servers in the sandbox) and reports each one's tools or
// why it is not available.
func (d *doctor) checkMCP(ctx context.Context, cfg config.Config, sc orchestrator.SandboxConfig, version string) {
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
	m := mcp.Start(servers, mcp.Options{Workspace: sc.Workspace, Sandbox: open, Version: version})
	defer m.Close()
	if err := m.Wait(ctx); err != nil {
		d.fail("mcp", err.Error(), "")
		return
	}
	for _, st := range m.Status() {
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
}

// checkSandbox checks the engine, the image, its tools and the workspace
// mount, each needing the one before.
func (d *doctor) checkSandbox(ctx context.Context, sc orchestrator.SandboxConfig) {
	if sc.Backend == sandbox.BackendKubernetes {
		d.checkKube(ctx, sc)
		return
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		d.fail("engine", err.Error(), "")
		for _, name := range []string{"image", "tools", "workspace"} {
			d.fail(name, "not checked: no engine", "")
		}
		return
	}
	defer eng.Close()
	info, err := eng.Info(ctx)
	if err != nil {
		d.fail("engine", err.Error(), "check that DOCKER_HOST points at a Docker engine")
	} else {
		mode := "rootful"
		switch {
		case info.Rootless:
			mode = "rootless"
		case info.UserNS:
			mode = "rootful with user namespace remapping"
		}
		d.ok("engine", "Docker %s (API %s, %s) at %s", info.ServerVersion, info.APIVersion, mode, info.Host)
	}

	img, ok := d.checkImage(ctx, eng, sc)
	if !ok {
		d.fail("tools", "not checked: no image", "")
		d.fail("workspace", "not checked: no image", "")
		return
	}
	sb, err := orchestrator.OpenDockerImage(ctx, eng, sc, img)
	if err != nil {
		d.fail("tools", "cannot open the sandbox: "+err.Error(), "")
		d.fail("workspace", "not checked: no sandbox", "")
		return
	}
	defer sb.Close()
	d.checkTools(ctx, sb)
	if sb.Info().Copy {
		d.checkCopy(ctx, sb, sc.Workspace, !eng.Local())
	} else if d.checkWorkspace(ctx, sb, sc.Workspace) {
		for _, p := range sb.Protections(ctx) {
			if p.OK {
				d.ok(p.Name, "%s", p.Detail)
			} else {
				d.fail(p.Name, p.Detail, p.Fix)
			}
		}
	}
	d.ok("sandbox", "network %s, memory %s, %g CPUs, %d processes", describeNetwork(sc),
		formatBytes(orDefaultInt(sc.Memory, docker.DefaultMemory)), orDefaultFloat(sc.CPUs, docker.DefaultCPUs), orDefaultInt(sc.Pids, docker.DefaultPids))
}

// checkImage finds the image without pulling it or building the default
// one; a project's Dockerfile or devcontainer.json is built when it
// changed, as a session would, since a build that fails is what there is
// to know.
func (d *doctor) checkImage(ctx context.Context, eng *docker.Engine, sc orchestrator.SandboxConfig) (docker.ResolvedImage, bool) {
	var img docker.ResolvedImage
	if sc.Image == "" {
		present, err := eng.ImageExists(ctx, images.Tag())
		if err != nil {
			d.fail("image", err.Error(), "")
			return img, false
		}
		if !present {
			d.fail("image", "the built-in image "+images.Tag()+" is not present", "run `shiro image build` (or just start shiro: it builds it)")
			return img, false
		}
		img = docker.Reference(images.Tag())
	} else {
		progress := sc.Progress
		if progress == nil {
			progress = io.Discard
		}
		var err error
		img, err = eng.ResolveImage(ctx, docker.ImageRequest{Spec: sc.Image, Workspace: sc.Workspace, FromProject: sc.ImageFromProject, NoPull: true, Progress: progress, Build: sc.BuildLimits()})
		if err != nil {
			var missing *docker.UnavailableImageError
			if errors.As(err, &missing) {
				d.fail("image", missing.Ref+" is not present locally", "`docker pull "+missing.Ref+"` (shiro pulls it when it starts), `docker load`, or --image with a Dockerfile")
			} else {
				d.fail("image", err.Error(), "")
			}
			return img, false
		}
	}
	desc, err := eng.DescribeImage(ctx, img.Ref)
	if err != nil {
		d.fail("image", err.Error(), "")
		return img, false
	}
	d.ok("image", "%s", desc)
	return img, true
}

// versionPattern finds a version number in a --version line.
var versionPattern = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

// imageTools are what shiro's container-side tools need, and what a
// missing one costs.
var imageTools = []struct{ name, without string }{
	{"bash", "the bash tool falls back to sh"},
	{"rg", "grep falls back to a slower Go search"},
	{"git", "the git tools fall back to a built-in reader"},
}

func (d *doctor) checkTools(ctx context.Context, sb sandbox.Sandbox) {
	var found, missing []string
	for _, t := range imageTools {
		var out bytes.Buffer
		res, err := sb.Run(ctx, sandbox.Command{Args: []string{t.name, "--version"}, Stdout: &out, Timeout: 30 * time.Second})
		switch {
		case errors.Is(err, exec.ErrNotFound):
			missing = append(missing, t.name)
		case err != nil:
			d.fail("tools", fmt.Sprintf("running %s in the sandbox failed: %v", t.name, err), "")
			return
		case res.ExitCode != 0:
			missing = append(missing, t.name+" (exits "+fmt.Sprint(res.ExitCode)+")")
		default:
			v := versionPattern.FindString(out.String())
			found = append(found, strings.TrimSpace(t.name+" "+v))
		}
	}
	if len(missing) == 0 {
		d.ok("tools", "%s", strings.Join(found, ", "))
		return
	}
	var costs []string
	for _, t := range imageTools {
		for _, m := range missing {
			if strings.HasPrefix(m, t.name) {
				costs = append(costs, t.without)
			}
		}
	}
	d.fail("tools", "the image lacks "+strings.Join(missing, ", ")+" ("+strings.Join(costs, "; ")+")",
		"install them in the image (Debian: apt-get install bash ripgrep git), or use the built-in image")
}

// checkWorkspace writes a file from the sandbox and looks at its owner on
// this side. It reports whether the sandbox works well enough for the
// protections to be checked.
func (d *doctor) checkWorkspace(ctx context.Context, sb sandbox.Sandbox, ws string) bool {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := ".shiro-doctor-" + hex.EncodeToString(suffix[:])
	probe := filepath.Join(ws, name)
	defer removeProbe(ws, name)
	res, err := sb.Run(ctx, sandbox.Command{Shell: ": > " + name, Timeout: 30 * time.Second})
	if errors.Is(err, sandbox.ErrNoShell) {
		d.fail("workspace", "not checked: the image has no shell", "use an image with sh or bash")
		return false
	}
	if err != nil || res.ExitCode != 0 {
		d.fail("workspace", fmt.Sprintf("the sandbox cannot write the workspace (exit %d, %v)", res.ExitCode, err),
			"check the workspace's permissions; on SELinux hosts the engine may need the directory labelled (chcon -t container_file_t)")
		return false
	}
	fi, err := os.Lstat(probe)
	if err != nil {
		d.fail("workspace", "a file written in the sandbox is not in the workspace: "+err.Error(),
			"the engine cannot bind-mount this directory (a remote engine, or Docker Desktop without file sharing for it)")
		return false
	}
	uid, gid, known := fileOwner(fi)
	me, myGID := os.Getuid(), os.Getgid()
	if known && (uid != me || gid != myGID) {
		d.fail("workspace", fmt.Sprintf("a file written in the sandbox belongs to %d:%d, not to you (%d:%d)", uid, gid, me, myGID),
			"rootless and user-namespace-remapped engines map the sandbox's ids to other ids on this machine; use a rootful engine (or Docker Desktop)")
		return true
	}
	if !known {
		d.ok("workspace", "the sandbox can write the workspace")
		return true
	}
	d.ok("workspace", "files written in the sandbox belong to you (%d:%d)", me, myGID)
	return true
}

// removeProbe removes the file name the sandbox wrote in the workspace ws,
// through the workspace's write gate (the sandbox may have put anything
// there since).
func removeProbe(ws, name string) {
	gate, err := hostwrite.Open(ws)
	if err != nil {
		return
	}
	defer gate.Close()
	_ = gate.Remove(name)
}

// checkCopy checks a sandbox that works on a copy of the workspace: it
// can write its copy, and what it writes does not reach the workspace.
func (d *doctor) checkCopy(ctx context.Context, sb sandbox.Sandbox, ws string, remote bool) {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := ".shiro-doctor-" + hex.EncodeToString(suffix[:])
	res, err := sb.Run(ctx, sandbox.Command{Shell: ": > " + name + " && rm " + name, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		d.fail("workspace", fmt.Sprintf("the sandbox cannot write its copy of the workspace (exit %d, %v)", res.ExitCode, err), "remove the sandbox (`shiro sandbox rm`); the next session makes it again")
		return
	}
	if _, err := os.Lstat(filepath.Join(ws, name)); err == nil {
		d.fail("workspace", "copy mode, but a file the sandbox wrote is in the workspace", "remove the sandbox (`shiro sandbox rm`) and report it")
		return
	}
	why := "--workspace copy"
	if remote {
		why = "the engine is not on this machine"
	}
	d.ok("workspace", "a copy in the sandbox (%s): your files change only when you apply its changes (/apply, or --apply with -p); git on this machine never sees what the sandbox does", why)
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

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orDefaultInt(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

func orDefaultFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
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

// describeNetwork says which network mode is active and what it means.
func describeNetwork(sc orchestrator.SandboxConfig) string {
	switch n := orDefault(sc.Network, docker.DefaultNetwork); n {
	case docker.NetworkAsk:
		return fmt.Sprintf("ask (every connection through shiro's proxy; %d allow and %d deny rules)", len(sc.HostRules.Allow), len(sc.HostRules.Deny))
	case docker.NetworkOpen, "bridge":
		return "open (Docker's bridge: the host, the LAN and the internet are reachable)"
	default:
		return n
	}
}
