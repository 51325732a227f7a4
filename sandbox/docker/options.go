package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
	"github.com/shiroagent/shiro/sandbox/owner"
)

// Labels put on everything shiro creates (and LabelOwner, owner.go).
const (
	LabelManaged   = "dev.shiro.managed"
	LabelWorkspace = "dev.shiro.workspace"
	LabelConfig    = "dev.shiro.config"
	LabelVersion   = "dev.shiro.version"
	LabelImage     = "dev.shiro.image"
	// LabelBuilt marks the images shiro builds. It is not LabelManaged:
	// containers inherit their image's labels (a build step's, a user's
	// `docker run`), and only containers shiro made for a workspace are its
	// to stop, sweep and prune.
	LabelBuilt = "dev.shiro.built"
)

// Defaults for the container's limits.
const (
	DefaultPids        = sandbox.DefaultPids
	DefaultMemory      = sandbox.DefaultMemory
	DefaultCPUs        = sandbox.DefaultCPUs
	DefaultIdleTimeout = 30 * time.Minute
	DefaultNetwork     = NetworkAsk
)

// Options choose the container for one workspace: the shared Spec and
// what only a Docker engine has.
type Options struct {
	// Spec is the session's sandbox. Open runs the image it is given
	// (Settings.Image names what ResolveImage made it from) and resolves
	// Settings.Env once, with LookupEnv: the NAME=value pairs reach every
	// command's exec (on top of the image's environment), not the
	// container's configuration, so they never appear in `docker
	// inspect`. Settings.Network is NetworkAsk (the default: no network of
	// its own, every connection through Egress), NetworkOpen ("bridge" is
	// another name for it) or NetworkNone; Settings.Idle stops the
	// container when no session has been open in it for that long.
	// NoSandbox and ImageFromProject mean nothing here. The workspace is
	// mounted at the same path (or copied, in copy mode).
	sandbox.Spec
	// NoMount lists host directories never to be mounted into the sandbox
	// (default: the user's home): a repository whose worktree starts
	// above the workspace is mounted read-only only if it holds none.
	NoMount []string
}

// resolve gives a copy of o that runs img: Image is its reference and Env
// the image's environment with o's resolved entries on top.
func (o Options) resolve(img ResolvedImage) (Options, error) {
	env, err := o.ResolveEnv(o.LookupEnv)
	if err != nil {
		return o, err
	}
	o.Image, o.Env = img.Ref, mergeEnv(img.Env, env)
	return o, nil
}

// mergeEnv joins NAME=value lists, a later entry replacing an earlier one
// of the same name in place.
func mergeEnv(lists ...[]string) []string {
	var out []string
	at := map[string]int{}
	for _, l := range lists {
		for _, kv := range l {
			name, _, _ := strings.Cut(kv, "=")
			if i, ok := at[name]; ok {
				out[i] = kv
				continue
			}
			at[name] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// withDefaults fills unset fields.
func (o Options) withDefaults() (Options, error) {
	if o.Memory == 0 {
		o.Memory = DefaultMemory
	}
	if o.CPUs == 0 {
		o.CPUs = DefaultCPUs
	}
	if o.Pids == 0 {
		o.Pids = DefaultPids
	}
	if o.Network == "" {
		o.Network = DefaultNetwork
	}
	if o.Idle == 0 {
		o.Idle = DefaultIdleTimeout
	}
	if o.UID == 0 && o.GID == 0 {
		o.UID, o.GID = os.Getuid(), os.Getgid()
	}
	if o.HelperBinary == "" {
		h, err := defaultHelper()
		if err != nil {
			return o, err
		}
		o.HelperBinary = h
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Notices == nil {
		progress := o.Progress
		o.Notices = func(s string) { fmt.Fprintf(progress, "[notice] %s\n", s) }
	}
	if o.NoMount == nil {
		if home, err := os.UserHomeDir(); err == nil {
			o.NoMount = []string{home}
		}
	}
	return o, o.Validate()
}

// HelperEnv names the environment variable that chooses the helper binary.
const HelperEnv = helper.BinaryEnv

// defaultHelper finds the helper to copy into containers (helper.FindBinary).
func defaultHelper() (string, error) { return helper.FindBinary() }

// copyMode reports whether the container holds a copy of the workspace
// (a volume at its path) rather than the directory itself.
func (o Options) copyMode() bool { return o.WorkspaceMode == sandbox.WorkspaceCopy }

// Validate reports options that cannot make a container.
func (o Options) Validate() error {
	var errs []error
	if !filepath.IsAbs(o.Workspace) {
		errs = append(errs, fmt.Errorf("workspace %q is not an absolute path", o.Workspace))
	}
	if o.Image == "" {
		errs = append(errs, errors.New("no image"))
	}
	switch o.Network {
	case NetworkAsk, NetworkOpen, NetworkNone, "bridge":
	default:
		errs = append(errs, fmt.Errorf("network %q: want ask, open or none", o.Network))
	}
	switch o.WorkspaceMode {
	case "", sandbox.WorkspaceMount, sandbox.WorkspaceCopy:
	default:
		errs = append(errs, fmt.Errorf("workspace mode %q: want mount or copy", o.WorkspaceMode))
	}
	if o.Memory < 16<<20 {
		errs = append(errs, fmt.Errorf("memory limit %d bytes is below 16 MiB", o.Memory))
	}
	if o.CPUs <= 0 {
		errs = append(errs, fmt.Errorf("cpu limit %g is not positive", o.CPUs))
	}
	if o.Pids < 16 {
		errs = append(errs, fmt.Errorf("pids limit %d is below 16", o.Pids))
	}
	for _, kv := range o.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("environment entry %q is not NAME=value", kv))
		}
	}
	return errors.Join(errs...)
}

// containerSpec is everything that decides a container's configuration.
// Its hash names the container: a change means a new container.
type containerSpec struct {
	Workspace   string
	WorkspaceID string // the directory's identity (workspaceID)
	Image       string
	ImageID     string
	Mounts      []string // target:source:ro of every mount beyond the defaults
	Memory      int64
	CPUs        float64
	Pids        int64
	Network     string
	IdleTimeout time.Duration
	UID, GID    int
	// Copy: a volume holds a copy of the workspace at its path (its name
	// is in Mounts, and so in the hash).
	Copy bool
}

func (s containerSpec) copyMode() bool { return s.Copy }

// specVersion changes when what a container holds changes shape: v3 has
// the root-owned helper, the state and shadow volumes and the git
// boundary's mounts.
const specVersion = "v3"

func (s containerSpec) hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%q\x00%d\x00%g\x00%d\x00%s\x00%d\x00%d:%d",
		specVersion, s.Workspace, s.WorkspaceID, s.Image, s.ImageID, s.Mounts, s.Memory, s.CPUs, s.Pids,
		s.Network, s.IdleTimeout, s.UID, s.GID)
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// tmpSize is the /tmp tmpfs's limit: a quarter of the memory limit, so
// that filling it ends in "no space left" and never in the memory limit's
// kill of whatever process is largest.
func (s containerSpec) tmpSize() int64 { return s.Memory / 4 }

// workspaceKey is a short stable hash of the workspace path.
func workspaceKey(ws string) string { return owner.WorkspaceKey(ws) }

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// containerName is readable (the workspace's base name) and unique (hashes
// of the path and the settings).
func (s containerSpec) containerName() string {
	base := nameUnsafe.ReplaceAllString(filepath.Base(s.Workspace), "-")
	base = strings.Trim(base, "-.")
	if len(base) > 40 {
		base = base[:40]
	}
	if base == "" {
		base = "root"
	}
	return fmt.Sprintf("shiro-%s-%s-%s", base, workspaceKey(s.Workspace), s.hash())
}

// Volumes: HOME (caches, shell history) and the state volume belong to a
// workspace directory (a new directory at the same path gets new ones);
// the shadow git directory belongs to one container.
func homeVolume(ws, wsID string) string  { return "shiro-home-" + workspaceVolumeKey(ws, wsID) }
func copyVolume(ws, wsID string) string  { return "shiro-copy-" + workspaceVolumeKey(ws, wsID) }
func stateVolume(ws, wsID string) string { return "shiro-state-" + workspaceVolumeKey(ws, wsID) }
func shadowVolume(containerName string) string {
	return containerName + "-git"
}
