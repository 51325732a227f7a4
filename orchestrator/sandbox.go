package orchestrator

import (
	"context"
	"io"
	"os"

	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/sandbox/local"
)

// SandboxConfig chooses and configures the sandbox of a session: the
// user's Settings (config.Config.Sandbox, embedded whole and handed to the
// backend whole) and what the session adds.
type SandboxConfig struct {
	sandbox.Settings
	Workspace string
	// HostRules are the egress proxy's allow and deny rules (ask mode).
	HostRules config.NetworkRules
	// askHost asks the user about a connection no rule decides; nil
	// denies it (headless). onConnection receives the record of every
	// connection in ask mode. A session sets both (its Asker, its
	// NetworkEvents).
	askHost      AskHostFunc
	onConnection func(egress.Record)
	// tagMoved hears that the image's tag moved (sandbox.Spec.TagMoved);
	// a session publishes it as an ImageMovedEvent.
	tagMoved func(sandbox.TagMove)
	// DataDir keeps this project's "always" answers ("" keeps them for the
	// process only).
	DataDir string
	// Version is shiro's version, recorded on the container.
	Version string
	// Progress receives start-up progress (image builds, container
	// creation). A session replaces it: its progress is a ProgressEvent.
	Progress io.Writer
	// LookupEnv reads the host environment; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Opened is the workspace opened once for the run; the backend reads
	// and writes the workspace through it (sandbox.Spec.Opened). A session
	// sets it to its own.
	Opened *workspace.Workspace
}

// LookupBackend is the backend the settings choose.
func (cfg SandboxConfig) LookupBackend() (sandbox.Backend, error) {
	return sandbox.Lookup(cfg.Backend)
}

// OpenSandbox opens the session's sandbox: the workspace's sandbox on the
// chosen backend, or the host with NoSandbox. The backend gets the image
// ready (the built-in one is built the first time it is needed).
func OpenSandbox(ctx context.Context, cfg SandboxConfig) (sandbox.Sandbox, error) {
	if cfg.NoSandbox {
		env, err := cfg.ResolveEnv(cfg.LookupEnv)
		if err != nil {
			return nil, err
		}
		// On the host, commands see the host's environment anyway; --env
		// entries are added on top.
		return local.New(cfg.Workspace, local.WithEnv(append(os.Environ(), env...)))
	}
	b, err := cfg.LookupBackend()
	if err != nil {
		return nil, err
	}
	spec, err := cfg.Spec()
	if err != nil {
		return nil, err
	}
	return b.Open(ctx, spec)
}

// Spec is what the backend opens: the settings with the workspace mode
// decided, and in ask mode the egress proxy that serves the sandbox's
// connections.
func (cfg SandboxConfig) Spec() (sandbox.Spec, error) {
	// A bad --env entry fails before anything is built or started; the
	// backend reads the host's values once, when it opens the sandbox.
	if err := cfg.CheckEnv(); err != nil {
		return sandbox.Spec{}, err
	}
	spec := sandbox.Spec{
		Settings:  cfg.Settings,
		Workspace: cfg.Workspace,
		Opened:    cfg.Opened,
		LookupEnv: cfg.LookupEnv,
		Version:   cfg.Version,
		Progress:  cfg.Progress,
		TagMoved:  cfg.tagMoved,
	}
	spec.WorkspaceMode = sandbox.WorkspaceMount
	if cfg.CopyMode() {
		spec.WorkspaceMode = sandbox.WorkspaceCopy
	}
	if cfg.Network == "" || cfg.Network == sandbox.NetworkAsk {
		p, err := newEgress(cfg)
		if err != nil {
			return sandbox.Spec{}, err
		}
		spec.Egress = p
	}
	return spec, nil
}

// CopyMode reports whether the session's sandbox holds a copy of the
// workspace (--workspace copy) rather than the directory itself: chosen,
// or the backend's default (a remote Docker engine's, Kubernetes').
func (cfg SandboxConfig) CopyMode() bool {
	switch {
	case cfg.NoSandbox:
		return false
	case cfg.WorkspaceMode != "":
		return cfg.WorkspaceMode == sandbox.WorkspaceCopy
	}
	b, err := cfg.LookupBackend()
	return err == nil && b.DefaultWorkspaceMode(cfg.Settings) == sandbox.WorkspaceCopy
}

// Kind names where the session's commands run: the backend's name, or
// "local" on the host.
func (cfg SandboxConfig) Kind() string {
	switch {
	case cfg.NoSandbox:
		return "local"
	case cfg.Backend == "":
		return sandbox.DefaultBackend
	}
	return cfg.Backend
}
