package sandbox

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Settings are what the user chooses about a session's sandbox. The
// configuration resolves them (config.Config.Sandbox is this type) and
// they reach the backend as they are: orchestrator.SandboxConfig and
// Spec embed them beside what a session adds (the workspace,
// the egress proxy's hooks, progress). Zero limits mean the sandbox's
// defaults.
type Settings struct {
	// Image is an image reference, a path to a Dockerfile or a
	// devcontainer.json, or "devcontainer" (the workspace's); empty means
	// the built-in image.
	Image string
	// ImageFromProject says Image comes from the project file: the paths
	// it names must stay inside the workspace.
	ImageFromProject bool
	// Pull pulls an image reference's tag again even when the engine has
	// it (--pull): the way to take a tag that moved on its registry. A
	// reference pinned by digest is never pulled again.
	Pull bool
	// Network is ask (the default), open or none ("bridge" is read as
	// open).
	Network string
	// Memory is the memory limit in bytes (the file says "4g"); CPUs and
	// Pids limit the container too.
	Memory int64
	CPUs   float64
	Pids   int64
	// Env lists NAME (the host's value, user file and flags only) or
	// NAME=value entries; ResolveEnv turns them into NAME=value pairs.
	// Never print it.
	Env []string
	// BuildSecrets are the secrets a Dockerfile build gets
	// (ParseBuildSecret entries: "id=NAME,env=VAR", "id=NAME,src=FILE");
	// only the user's file and flags can set them. Never print their values.
	BuildSecrets []string
	// NoSandbox runs commands on the host. Only the user's file and flags
	// can set it.
	NoSandbox bool
	// Idle stops the container after this long with nothing running
	// (--idle-timeout; no configuration key sets it).
	Idle time.Duration
	// Backend names the backend sandboxes run on (Lookup): BackendDocker
	// (empty means it), BackendKubernetes, or another registered one.
	Backend string
	// WorkspaceMode is how the sandbox holds the workspace: WorkspaceMount
	// (the directory bind-mounted) or WorkspaceCopy (a copy in the
	// sandbox's own storage, which reaches the directory only when the
	// user applies it). Empty chooses: mount on a local Docker engine,
	// copy on a remote one and on Kubernetes.
	WorkspaceMode string
	// KubeContext and Namespace choose the Kubernetes cluster and
	// namespace; empty means the kubeconfig's current context and its
	// namespace.
	KubeContext, Namespace string
	// StorageClass is the StorageClass of the workspace's claim on
	// Kubernetes; empty means the cluster's default class.
	StorageClass string
	// ImagePullSecret names an existing secret of the namespace that the
	// cluster's nodes pull the pod's image with on Kubernetes; empty means
	// none (the service account's, if any).
	ImagePullSecret string
	// Publish lists the ports a session carries from the host to the
	// sandbox ("8080:3000", "3000"; publish.ParseMappings), and
	// PublishAddress is the host address they listen on (empty means
	// 127.0.0.1). Only the user's file and flags can set them.
	Publish        []string
	PublishAddress string
}

// The backends and workspace modes Settings can name.
const (
	BackendDocker     = "docker"
	BackendKubernetes = "kubernetes"
	WorkspaceMount    = "mount"
	WorkspaceCopy     = "copy"
)

// CheckEnv reports an Env entry that is neither NAME nor NAME=value, without
// reading the host environment: callers check before building or starting
// anything, and ResolveEnv reads it once, when the sandbox opens.
func (s Settings) CheckEnv() error {
	for _, e := range s.Env {
		if name, _, _ := strings.Cut(e, "="); name == "" || strings.ContainsAny(name, " \t\n") {
			return fmt.Errorf("--env %q: want NAME or NAME=value", e)
		}
	}
	return nil
}

// ResolveEnv turns Env into NAME=value pairs: a bare NAME takes the value
// lookup gives (and is skipped when unset), NAME=value is passed as is. A
// nil lookup reads the process's environment.
func (s Settings) ResolveEnv(lookup func(string) (string, bool)) ([]string, error) {
	if err := s.CheckEnv(); err != nil {
		return nil, err
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	out := make([]string, 0, len(s.Env))
	for _, e := range s.Env {
		name, _, hasValue := strings.Cut(e, "=")
		if hasValue {
			out = append(out, e)
			continue
		}
		if v, ok := lookup(name); ok {
			out = append(out, name+"="+v)
		}
	}
	return out, nil
}
