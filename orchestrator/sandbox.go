package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/sandbox/kube"
	"github.com/shiroagent/shiro/sandbox/local"
)

// SandboxConfig chooses and configures the sandbox of a session: the
// user's Settings (config.Config.Sandbox, embedded whole and handed to the
// engine whole) and what the session adds.
type SandboxConfig struct {
	sandbox.Settings
	Workspace string
	// HostRules are the egress proxy's allow and deny rules (ask mode).
	HostRules config.NetworkRules
	// AskHost asks the user about a connection no rule decides; nil
	// denies it (headless).
	AskHost AskHostFunc
	// OnConnection receives the record of every connection in ask mode.
	OnConnection func(egress.Record)
	// DataDir keeps this project's "always" answers ("" keeps them for the
	// process only).
	DataDir string
	// Version is shiro's version, recorded on the container.
	Version string
	// Progress receives start-up progress (image builds, container creation).
	Progress io.Writer
	// LookupEnv reads the host environment; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// OpenSandbox opens the session's sandbox: the workspace's container, or the
// host with NoSandbox. The default image is built (offline when no registry
// answers) the first time it is needed.
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
	if cfg.Backend == sandbox.BackendKubernetes {
		return OpenKube(ctx, cfg)
	}
	eng, sb, err := OpenDocker(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &ownedEngine{Sandbox: sb, eng: eng}, nil
}

// OpenDocker connects to the engine and opens the workspace's container
// session. The caller closes both.
func OpenDocker(ctx context.Context, cfg SandboxConfig) (*docker.Engine, *docker.Sandbox, error) {
	// A bad --env entry fails before anything is built or started; the
	// engine reads the host's values once, when it opens the sandbox.
	if err := cfg.CheckEnv(); err != nil {
		return nil, nil, err
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	img, err := ResolveSandboxImage(ctx, eng, cfg)
	if err != nil {
		eng.Close()
		return nil, nil, err
	}
	sb, err := OpenDockerImage(ctx, eng, cfg, img)
	if err != nil {
		eng.Close()
		return nil, nil, err
	}
	return eng, sb, nil
}

// ResolveSandboxImage makes sure the engine has the image cfg asks for: the
// default image (built the first time, offline when no registry answers),
// or the reference, Dockerfile or devcontainer.json cfg.Image names (pulled
// or built as needed). Progress and notices (the devcontainer fields
// ignored) are written to cfg.Progress.
func ResolveSandboxImage(ctx context.Context, eng *docker.Engine, cfg SandboxConfig) (docker.ResolvedImage, error) {
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Image == "" {
		if err := ensureDefaultImage(ctx, eng, progress); err != nil {
			return docker.ResolvedImage{}, err
		}
		return docker.Reference(images.Tag()), nil
	}
	return eng.ResolveImage(ctx, docker.ImageRequest{
		Spec:        cfg.Image,
		Workspace:   cfg.Workspace,
		FromProject: cfg.ImageFromProject,
		Progress:    progress,
		Build:       cfg.BuildLimits(),
	})
}

// BuildLimits are the network and resources an image build gets: the
// session's.
func (cfg SandboxConfig) BuildLimits() docker.BuildLimits {
	return docker.BuildLimits{Network: cfg.Network, Memory: cfg.Memory, CPUs: cfg.CPUs}
}

// OpenDockerImage opens the workspace's container session on an image
// ResolveSandboxImage returned. The environment is the image's (from a
// devcontainer.json) with cfg.Env, resolved by the engine, on top.
func OpenDockerImage(ctx context.Context, eng *docker.Engine, cfg SandboxConfig, img docker.ResolvedImage) (*docker.Sandbox, error) {
	var eg docker.Egress
	if cfg.Network == "" || cfg.Network == docker.NetworkAsk {
		p, err := newEgress(cfg)
		if err != nil {
			return nil, err
		}
		eg = p
	}
	settings := cfg.Settings
	settings.WorkspaceMode = sandbox.WorkspaceMount
	if cfg.CopyMode() {
		settings.WorkspaceMode = sandbox.WorkspaceCopy
	}
	return eng.Open(ctx, img, docker.Options{
		Settings:  settings,
		Workspace: cfg.Workspace,
		LookupEnv: cfg.LookupEnv,
		Egress:    eg,
		Version:   cfg.Version,
		Progress:  cfg.Progress,
	})
}

// OpenKube opens the workspace's pod session on the cluster of cfg's
// kube context and namespace (the kubeconfig's current ones when empty).
// The image is a reference the cluster has or can pull (the built-in
// image's tag when empty); the workspace on the pod's claim starts empty
// (the copy mode puts it there).
func OpenKube(ctx context.Context, cfg SandboxConfig) (*kube.Sandbox, error) {
	if err := cfg.CheckEnv(); err != nil {
		return nil, err
	}
	if cfg.WorkspaceMode == sandbox.WorkspaceMount {
		return nil, errors.New("the kubernetes backend cannot mount the workspace directory (--workspace mount): its pods hold a copy (--workspace copy)")
	}
	c, err := kube.Connect(ctx, kube.ConnectOptions{Context: cfg.KubeContext, Namespace: cfg.Namespace})
	if err != nil {
		return nil, err
	}
	opts := kube.Options{
		Settings:  cfg.Settings,
		Workspace: cfg.Workspace,
		LookupEnv: cfg.LookupEnv,
		Version:   cfg.Version,
		Progress:  cfg.Progress,
	}
	if cfg.Network == "" || cfg.Network == sandbox.NetworkAsk {
		p, err := newEgress(cfg)
		if err != nil {
			return nil, err
		}
		opts.Egress = p
	}
	return c.Open(ctx, opts)
}

// ownedEngine closes the engine connection with the session.
type ownedEngine struct {
	*docker.Sandbox
	eng *docker.Engine
}

func (o *ownedEngine) Close() error {
	err := o.Sandbox.Close()
	o.eng.Close()
	return err
}

// ensureDefaultImage builds the default image when it is missing.
func ensureDefaultImage(ctx context.Context, eng *docker.Engine, progress io.Writer) error {
	ok, err := eng.ImageExists(ctx, images.Tag())
	if err != nil || ok {
		return err
	}
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "building the sandbox image %s (once)\n", images.Tag())
	return eng.BuildDefaultImageAuto(ctx, docker.BuildOptions{Progress: progress})
}
