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
)

// Labels put on everything shiro creates.
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
	DefaultNetwork     = "bridge"
)

// Paths inside the container.
const (
	helperDir = "/.shiro"
	homeDir   = "/home/shiro"
)

// Options choose the container for one workspace.
type Options struct {
	// Workspace is the absolute host path, mounted at the same path.
	Workspace string
	// Image is the image reference to run.
	Image string
	// Env holds KEY=VALUE pairs given to every command (the names the user
	// allowed with --env). They reach the session's exec, not the
	// container's configuration, so they never appear in `docker inspect`.
	Env []string
	// Memory (bytes), CPUs and Pids limit the container.
	Memory int64
	CPUs   float64
	Pids   int64
	// Network is "bridge" or "none".
	Network string
	// IdleTimeout stops the container when nothing has run in it for this long.
	IdleTimeout time.Duration
	// UID and GID run every command; default the current user's.
	UID, GID int
	// UserName names the passwd entry made for UID; default the host's name.
	UserName string
	// HelperBinary is a static Linux build of shiro copied into the
	// container; default the running executable.
	HelperBinary string
	// Version is recorded in a label.
	Version string
	// Progress receives human-readable lines while the sandbox starts.
	Progress io.Writer
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
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.UID == 0 && o.GID == 0 {
		o.UID, o.GID = os.Getuid(), os.Getgid()
	}
	if o.HelperBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("find the shiro binary to copy into the sandbox: %w", err)
		}
		o.HelperBinary = exe
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, o.Validate()
}

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
	case "bridge", "none":
	default:
		errs = append(errs, fmt.Errorf("network %q: want bridge or none", o.Network))
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
	Image       string
	ImageID     string
	Protected   []string
	Memory      int64
	CPUs        float64
	Pids        int64
	Network     string
	IdleTimeout time.Duration
	UID, GID    int
}

// hash is versioned: v2 containers carry the profile.d PATH script.
func (s containerSpec) hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "v2\x00%s\x00%s\x00%s\x00%q\x00%d\x00%g\x00%d\x00%s\x00%d\x00%d:%d",
		s.Workspace, s.Image, s.ImageID, s.Protected, s.Memory, s.CPUs, s.Pids,
		s.Network, s.IdleTimeout, s.UID, s.GID)
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// workspaceKey is a short stable hash of the workspace path.
func workspaceKey(ws string) string {
	sum := sha256.Sum256([]byte(ws))
	return hex.EncodeToString(sum[:])[:10]
}

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

// homeVolume keeps the user's HOME (caches, shell history) per workspace.
func homeVolume(ws string) string { return "shiro-home-" + workspaceKey(ws) }

// protectedPaths lists the paths under the workspace that later run code on
// the host when the user runs git, so they are mounted read-only.
func protectedPaths(ws string) []string {
	var out []string
	if fi, err := os.Stat(filepath.Join(ws, ".git")); err == nil && fi.IsDir() {
		// A repository without a hooks directory would let the sandbox
		// create one; make it so it can be mounted read-only.
		_ = os.Mkdir(filepath.Join(ws, ".git", "hooks"), 0o755)
	}
	for _, rel := range []string{".git/hooks", ".git/config"} {
		p := filepath.Join(ws, rel)
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}
