package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/worktree"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools"
)

// SandboxFlags are the flags of every command that executes something.
type SandboxFlags struct {
	NoSandbox bool
	Image     string
	Env       []string
	Memory    string
	CPUs      float64
	Pids      int64
	Network   string
	Idle      time.Duration
	// Pull pulls the image's tag again (sandbox.Settings.Pull).
	Pull bool
	// Backend, Workspace, KubeContext, Namespace and StorageClass choose where the
	// sandbox runs and how it holds the workspace.
	Backend, Workspace, KubeContext, Namespace, StorageClass string
	// ImagePullSecret names the pull secret of the kubernetes backend's
	// pods.
	ImagePullSecret string
	// TrustProject lets the project's asks (its MCP servers, its image
	// build) happen this time without a question.
	TrustProject bool
	// AllowHosts are --allow-host patterns.
	AllowHosts []string
	// BuildSecrets are --build-secret entries.
	BuildSecrets []string
	// Publish are --publish mappings and PublishAddress --publish-address
	// (flags of a session only: bindPublish).
	Publish        []string
	PublishAddress string

	flags, publishFlags *pflag.FlagSet
}

// bind registers the flags on cmd's persistent flag set.
func (s *SandboxFlags) bind(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	s.flags = fl
	fl.BoolVar(&s.NoSandbox, "no-sandbox", false, "run commands on the host instead of in a container (no isolation)")
	fl.StringVar(&s.Image, "image", "", "sandbox image: an image reference, a path to a Dockerfile or devcontainer.json, or \"devcontainer\"; default the built-in image")
	fl.BoolVar(&s.Pull, "pull", false, "pull the --image tag again even when the engine has it (take a tag that moved on its registry)")
	fl.StringArrayVar(&s.Env, "env", nil, "pass an environment variable into the sandbox: NAME (value from the host) or NAME=value; repeatable")
	fl.StringVar(&s.Memory, "memory", "", "sandbox memory limit, e.g. 4g or 512m (default 4g)")
	fl.Float64Var(&s.CPUs, "cpus", 0, "sandbox CPU limit (default 2)")
	fl.Int64Var(&s.Pids, "pids", 0, "sandbox process limit (default 1024)")
	fl.StringVar(&s.Network, "network", "", "sandbox network: ask (default: every host through shiro's proxy, by your rules), open or none")
	fl.StringArrayVar(&s.BuildSecrets, "build-secret", nil, "give a Dockerfile build a secret for its RUN --mount=type=secret steps: id=NAME,env=VAR or id=NAME,src=FILE; repeatable")
	fl.StringArrayVar(&s.AllowHosts, "allow-host", nil, "let the sandbox reach a host in ask mode: example.com, *.example.com or host:port; repeatable")
	fl.StringVar(&s.Backend, "backend", "", "where sandboxes run: "+strings.Join(sandbox.Backends(), ", ")+" (default "+sandbox.DefaultBackend+")")
	fl.StringVar(&s.Workspace, "workspace", "", "how the sandbox holds the workspace: mount (default on a local Docker engine) or copy (changes reach it with /apply or --apply)")
	fl.StringVar(&s.KubeContext, "kube-context", "", "the kubeconfig context of the kubernetes backend (default: the current one)")
	fl.StringVar(&s.Namespace, "namespace", "", "the Kubernetes namespace of the kubernetes backend (default: the context's)")
	fl.StringVar(&s.StorageClass, "storage-class", "", "the StorageClass of the workspace's claim on the kubernetes backend (default: the cluster's default class)")
	fl.StringVar(&s.ImagePullSecret, "image-pull-secret", "", "an existing secret of the namespace that the kubernetes backend's nodes pull the image with")
	fl.DurationVar(&s.Idle, "idle-timeout", 0, "stop the sandbox container after this long with nothing running (default 30m)")
	_ = fl.MarkHidden("idle-timeout")
	fl.BoolVar(&s.TrustProject, "trust-project", false, "let this workspace's project config start its MCP servers and build or pull its image, this time (see `shiro trust`)")
}

// bindPublish registers the flags of published ports on fl: only a
// session (the chat UI and -p) publishes ports.
func (s *SandboxFlags) bindPublish(fl *pflag.FlagSet) {
	s.publishFlags = fl
	fl.StringArrayVar(&s.Publish, "publish", nil, "carry a host port to a port of the sandbox: HOST_PORT:CONTAINER_PORT or PORT (listens on 127.0.0.1); repeatable")
	fl.StringVar(&s.PublishAddress, "publish-address", "", "the host address --publish listens on (default 127.0.0.1; any other is reachable from other machines)")
}

// overrides puts the flags the user gave into o.
func (s *SandboxFlags) overrides(o *config.Overrides) {
	changed := func(name string) bool { return s.flags != nil && s.flags.Changed(name) }
	if changed("no-sandbox") {
		o.NoSandbox = &s.NoSandbox
	}
	if changed("image") {
		o.Image = &s.Image
	}
	if changed("memory") {
		o.Memory = &s.Memory
	}
	if changed("cpus") {
		o.CPUs = &s.CPUs
	}
	if changed("pids") {
		o.Pids = &s.Pids
	}
	if changed("network") {
		o.Network = &s.Network
	}
	for _, f := range []struct {
		name string
		v    *string
		dst  **string
	}{
		{"backend", &s.Backend, &o.Backend},
		{"workspace", &s.Workspace, &o.WorkspaceMode},
		{"kube-context", &s.KubeContext, &o.KubeContext},
		{"namespace", &s.Namespace, &o.Namespace},
		{"storage-class", &s.StorageClass, &o.StorageClass},
		{"image-pull-secret", &s.ImagePullSecret, &o.ImagePullSecret},
	} {
		if changed(f.name) {
			*f.dst = f.v
		}
	}
	o.Env = s.Env
	o.AllowHosts = s.AllowHosts
	o.BuildSecrets = s.BuildSecrets
	o.Publish = s.Publish
	if s.publishFlags != nil && s.publishFlags.Changed("publish-address") {
		o.PublishAddress = &s.PublishAddress
	}
}

// ModelFlags choose the provider and model.
type ModelFlags struct {
	Provider, Model, BaseURL, Thinking, Agent string
	// Models are every --model given, in order: Model is the last; only
	// --parallel takes more than one (its agents use them in turn).
	Models          []string
	Yolo, NoPlugins bool
	flags           *pflag.FlagSet
}

func (m *ModelFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	m.flags = fl
	fl.StringVar(&m.Provider, "provider", "", "model provider: anthropic, openai or openai-compatible")
	fl.StringArrayVar(&m.Models, "model", nil, "the model `id` (with --parallel, up to one per agent: the agents use them in turn)")
	fl.StringVar(&m.BaseURL, "base-url", "", "API base URL (Ollama, vLLM, OpenRouter, a proxy)")
	fl.StringVar(&m.Agent, "agent", "", "agent variant: default, quick, deep, plan, review")
	fl.StringVar(&m.Thinking, "think", "", "thinking level: off, low, medium, high, max (default: the variant's)")
	fl.BoolVar(&m.Yolo, "yolo", false, "skip approval prompts (the guard still refuses destructive commands)")
	fl.BoolVar(&m.NoPlugins, "no-plugins", false, "disable every plugin, the guard included")
}

func (m *ModelFlags) overrides(o *config.Overrides) {
	if m.flags == nil {
		return
	}
	set := func(name string, v *string, dst **string) {
		if m.flags.Changed(name) {
			*dst = v
		}
	}
	if n := len(m.Models); n > 0 {
		m.Model = m.Models[n-1]
	}
	set("provider", &m.Provider, &o.Provider)
	set("model", &m.Model, &o.Model)
	set("base-url", &m.BaseURL, &o.BaseURL)
	set("think", &m.Thinking, &o.Thinking)
	set("agent", &m.Agent, &o.Agent)
	if m.flags.Changed("yolo") {
		o.Yolo = &m.Yolo
	}
	if m.NoPlugins {
		none := []string{}
		o.Plugins = &none
	}
}

// loadConfig resolves the configuration for the workspace w, prints its
// notices, and withholds the project's asks unless the workspace is trusted
// (one notice line each).
func (f *Factory) loadConfig(w *workspace.Workspace, sf *SandboxFlags, mf *ModelFlags) (config.Config, config.Paths, error) {
	cfg, paths, err := f.loadConfigAsked(w, sf, mf)
	if err != nil {
		return cfg, paths, err
	}
	_, err = f.gateTrust(&cfg, paths, w, sf)
	return cfg, paths, err
}

// loadConfigAsked is loadConfig with the project's asks left in (the chat
// UI asks about them).
func (f *Factory) loadConfigAsked(w *workspace.Workspace, sf *SandboxFlags, mf *ModelFlags) (config.Config, config.Paths, error) {
	paths, err := config.ResolvePaths(f.LookupEnv)
	if err != nil {
		return config.Config{}, paths, err
	}
	var o config.Overrides
	if sf != nil {
		sf.overrides(&o)
	}
	if mf != nil {
		mf.overrides(&o)
	}
	known := make([]string, 0, 3)
	for _, s := range tools.KnownSets() {
		known = append(known, string(s))
	}
	cfg, notices, err := config.Load(config.LoadOptions{Paths: paths, Workspace: w.Path(), Root: w.Root(), Env: f.LookupEnv, Flags: o, KnownToolSets: known})
	if err != nil {
		return cfg, paths, err
	}
	for _, n := range notices {
		fmt.Fprintf(f.ErrOut, "[notice] %s\n", n)
	}
	return cfg, paths, nil
}

// sandboxConfig is the sandbox of a session: the configuration's
// settings as they are, --idle-timeout, and what the session adds.
func (f *Factory) sandboxConfig(cfg config.Config, paths config.Paths, ws string, sf *SandboxFlags) orchestrator.SandboxConfig {
	sc := orchestrator.SandboxConfig{
		Settings:  cfg.Sandbox,
		Workspace: ws,
		HostRules: cfg.Network,
		DataDir:   paths.DataDir,
		Version:   f.Version,
		Progress:  f.ErrOut,
		LookupEnv: f.LookupEnv,
	}
	if sf != nil {
		sc.Idle, sc.Pull = sf.Idle, sf.Pull
	}
	return sc
}

// workspace is the absolute current directory.
func (f *Factory) workspace() (string, error) {
	wd, err := f.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the workspace: %w", err)
	}
	return filepath.Abs(wd)
}

// openWorkspace opens the workspace, the current directory, once for the
// command: everything that reads or writes it takes this one open. The
// command closes it when it is done.
func (f *Factory) openWorkspace() (*workspace.Workspace, error) {
	ws, err := f.workspace()
	if err != nil {
		return nil, err
	}
	return workspace.Open(ws)
}

// sessionWorkspace is the workspace of a session, opened once, and, with
// --worktree, the worktree agent it runs as.
type sessionWorkspace struct {
	*workspace.Workspace
	// Agent is the worktree agent (nil without --worktree).
	Agent *worktree.Agent
	// release lets go of the agent's running mark.
	release func()
}

// Close closes the workspace and lets go of the agent.
func (s *sessionWorkspace) Close() error {
	err := s.Workspace.Close()
	if s.release != nil {
		s.release()
	}
	return err
}

// openSessionWorkspace opens the workspace of a session: the current
// directory, or with --worktree NAME the worktree of the agent NAME (made
// or reused by worktree.Open), marked running for as long as the session
// holds it open.
func (f *Factory) openSessionWorkspace(ctx context.Context, opts *RunOptions) (*sessionWorkspace, error) {
	if opts.Worktree == "" {
		if opts.From != "" {
			return nil, usagef("--from needs --worktree NAME")
		}
		w, err := f.openWorkspace()
		if err != nil {
			return nil, err
		}
		sw := &sessionWorkspace{Workspace: w}
		// Started in an agent's worktree: the session is the agent's.
		if err := f.holdAgentAt(sw); err != nil {
			w.Close()
			return nil, err
		}
		return sw, nil
	}
	if opts.Resume != "" {
		return nil, usagef("--worktree goes with -c, not -r (a session resumed by id runs where it ran)")
	}
	dir, err := f.workspace()
	if err != nil {
		return nil, err
	}
	paths, err := config.ResolvePaths(f.LookupEnv)
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
	}
	folder, err := f.worktreesDir(paths)
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
	}
	a, err := worktree.Open(ctx, worktree.OpenOptions{Dir: dir, Name: opts.Worktree, From: opts.From, DataDir: paths.DataDir, WorktreeDir: folder})
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
	}
	release, err := worktree.LayoutFor(paths.DataDir, folder, a.CommonDir).Hold(a.Name)
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
	}
	w, err := workspace.Open(a.Path)
	if err != nil {
		release()
		return nil, err
	}
	return &sessionWorkspace{Workspace: w, Agent: a, release: release}, nil
}

// holdAgentAt makes sw the session of the worktree agent whose worktree it
// is, if any, holding the agent as --worktree does.
func (f *Factory) holdAgentAt(sw *sessionWorkspace) error {
	paths, err := config.ResolvePaths(f.LookupEnv)
	if err != nil || paths.DataDir == "" {
		return nil // no data directory: no agents either
	}
	folder, err := f.worktreesDir(paths)
	if err != nil {
		return nil // the full configuration load says what is wrong
	}
	a, err := worktree.AgentAt(paths.DataDir, folder, sw.Path())
	if err != nil || a == nil || a.Path != sw.Path() {
		return nil
	}
	release, err := worktree.LayoutFor(paths.DataDir, folder, a.CommonDir).Hold(a.Name)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	sw.Agent, sw.release = a, release
	return nil
}

// worktreesDir is the configured folder of worktree agents, "" for the
// default: worktrees.dir, read from the user's config alone (no project's
// file is read before the agent's worktree is known; a project cannot set
// it anyway), a ~/ path expanded.
func (f *Factory) worktreesDir(paths config.Paths) (string, error) {
	cfg, _, err := config.Load(config.LoadOptions{Paths: paths, Env: f.LookupEnv})
	if err != nil {
		return "", err
	}
	dir := cfg.WorktreesDir
	if rest, ok := strings.CutPrefix(dir, "~/"); ok {
		home, _ := f.LookupEnv("HOME")
		if home == "" {
			return "", errors.New(`"worktrees.dir" starts with ~/ but HOME is not set: give an absolute path`)
		}
		dir = filepath.Join(home, rest)
	}
	return dir, nil
}

// NewCmdRoot builds the shiro command tree.
func NewCmdRoot(f *Factory) *cobra.Command {
	sf := &SandboxFlags{}
	opts := &RunOptions{Sandbox: sf, Model: &ModelFlags{}}
	cmd := &cobra.Command{
		Use:           "shiro [prompt]",
		Short:         "A terminal coding agent whose tools run in a container",
		Long:          rootHelp(f.LookupEnv),
		Version:       f.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Prompt = args[0]
			}
			return runRoot(cmd, f, opts)
		},
	}
	cmd.SetVersionTemplate(versionLine(f.Version))
	cmd.SetIn(f.In)
	cmd.SetOut(f.Out)
	cmd.SetErr(f.ErrOut)
	cmd.SetFlagErrorFunc(flagErrors)
	sf.bind(cmd)
	opts.Model.bind(cmd)
	fl := cmd.Flags()
	fl.BoolVarP(&opts.Print, "print", "p", false, "run headless: the prompt from the argument or piped stdin")
	fl.BoolVar(&opts.JSON, "json", false, "with -p: print every event as one JSON line")
	fl.StringVar(&opts.OutputSchema, "output-schema", "", "with -p: the final answer must be one JSON value valid against the JSON Schema in FILE (else exit 1)")
	fl.BoolVarP(&opts.Continue, "continue", "c", false, "continue the newest session of this directory")
	fl.StringVarP(&opts.Resume, "resume", "r", "", "resume a session by id or unique prefix")
	fl.StringVar(&opts.Worktree, "worktree", "", "run as the worktree agent NAME: in its own worktree of this repository on the branch shiro/NAME, with its own sandbox (made or reused; -c continues its session)")
	fl.StringVar(&opts.From, "from", "", "with --worktree: the commit a new agent's branch starts from (default HEAD)")
	fl.BoolVar(&opts.NoInstructions, "no-instructions", false, "do not load AGENTS.md, CLAUDE.md or .shiro.md")
	fl.BoolVar(&opts.NoMemory, "no-memory", false, "no project memory: no remember, recall or forget, no notes in the prompt")
	fl.BoolVar(&opts.NoSkills, "no-skills", false, "load no skills (no skill tool)")
	fl.BoolVar(&opts.NoSubagent, "no-subagent", false, "do not offer the task subagent")
	fl.BoolVar(&opts.NoMCP, "no-mcp", false, "start no MCP servers (neither yours nor the project's)")
	sf.bindPublish(fl)
	fl.BoolVar(&opts.Apply, "apply", false, "with -p in copy mode: apply the sandbox's changes to the workspace when the run ends")
	bindParallel(fl, &opts.Parallel)
	cmd.AddCommand(
		NewCmdTool(f, sf, nil),
		NewCmdTools(f),
		NewCmdSessions(f),
		NewCmdUndo(f, nil),
		NewCmdSandbox(f, sf),
		NewCmdImage(f, sf, nil),
		NewCmdDoctor(f, sf, nil),
		NewCmdTrust(f),
		NewCmdAgents(f, sf),
		NewCmdHelper(f),
	)
	return cmd
}
