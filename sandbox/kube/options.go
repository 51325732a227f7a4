package kube

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// Defaults of a sandbox pod.
const (
	DefaultMemory      = sandbox.DefaultMemory
	DefaultCPUs        = sandbox.DefaultCPUs
	DefaultIdleTimeout = 30 * time.Minute
	DefaultNetwork     = sandbox.NetworkAsk
	// DefaultClaimSize is the storage a workspace's claim requests.
	DefaultClaimSize = 10 << 30
	// DefaultStartTimeout bounds how long a new pod may take to run
	// (scheduling, the claim's binding, the image, the setup).
	DefaultStartTimeout = 3 * time.Minute
)

// Options choose the pod of one workspace: the shared Spec and what only
// a cluster has.
type Options struct {
	// Spec is the session's sandbox. Image is an image reference the
	// cluster has or can pull (empty: the built-in image's tag); a
	// Dockerfile or devcontainer.json needs a registry, which this backend
	// does not have (ImageError). Env is resolved once, with LookupEnv,
	// and reaches the session's helper over its channel (never the pod's
	// spec). Network is ask (the default: no network of the pod's own
	// where the cluster enforces NetworkPolicy, every connection through
	// Egress), open or none. Idle ends the pod once no session has been
	// open in it for that long. Pids is the kubelet's to set, not a pod's.
	// KubeContext and Namespace were used by Connect. The pod holds the
	// workspace at the same path, on the workspace's claim (empty at
	// first: copying it in and out is the caller's).
	sandbox.Spec
	// ClaimSize is the storage the workspace's claim requests (default
	// DefaultClaimSize). Its class is Settings.StorageClass.
	ClaimSize int64
	// StartTimeout bounds a new pod's start (default DefaultStartTimeout).
	StartTimeout time.Duration
}

// withDefaults fills unset fields and checks the result.
func (o Options) withDefaults() (Options, error) {
	if o.Image == "" {
		o.Image = images.Tag()
	}
	if o.Memory == 0 {
		o.Memory = DefaultMemory
	}
	if o.CPUs == 0 {
		o.CPUs = DefaultCPUs
	}
	if o.Network == "" {
		o.Network = DefaultNetwork
	}
	if o.Network == "bridge" {
		o.Network = sandbox.NetworkOpen
	}
	if o.Idle == 0 {
		o.Idle = DefaultIdleTimeout
	}
	if o.UID == 0 && o.GID == 0 {
		o.UID, o.GID = os.Getuid(), os.Getgid()
	}
	if o.UserName == "" {
		o.UserName = hostUserName()
	}
	if o.HelperBinary == "" {
		h, err := helper.FindBinary()
		if err != nil {
			return o, err
		}
		o.HelperBinary = h
	}
	if o.ClaimSize == 0 {
		o.ClaimSize = DefaultClaimSize
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Notices == nil {
		progress := o.Progress
		o.Notices = func(s string) { fmt.Fprintf(progress, "[notice] %s\n", s) }
	}
	return o, o.Validate()
}

// Validate reports options that cannot make a pod.
func (o Options) Validate() error {
	var errs []error
	if !filepath.IsAbs(o.Workspace) {
		errs = append(errs, fmt.Errorf("workspace %q is not an absolute path", o.Workspace))
	}
	if err := CheckImage(o.Image); err != nil {
		errs = append(errs, err)
	}
	switch o.Network {
	case sandbox.NetworkAsk, sandbox.NetworkOpen, sandbox.NetworkNone:
	default:
		errs = append(errs, fmt.Errorf("network %q: want ask, open or none", o.Network))
	}
	if o.Memory < 64<<20 {
		errs = append(errs, fmt.Errorf("memory limit %d bytes is below 64 MiB", o.Memory))
	}
	if o.CPUs <= 0 {
		errs = append(errs, fmt.Errorf("cpu limit %g is not positive", o.CPUs))
	}
	if o.UID < 0 || o.GID < 0 {
		errs = append(errs, fmt.Errorf("uid:gid %d:%d is negative", o.UID, o.GID))
	}
	if o.ClaimSize < 1<<20 {
		errs = append(errs, fmt.Errorf("claim size %d bytes is below 1 MiB", o.ClaimSize))
	}
	if err := o.CheckEnv(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ImageError says an image setting names something a cluster cannot run
// as it is: a Dockerfile or devcontainer.json, which would need a build
// and a registry to push it to.
type ImageError struct{ Spec string }

func (e *ImageError) Error() string {
	return fmt.Sprintf("the kubernetes backend runs images the cluster has or can pull, and %q names a file to build: "+
		"build it, push it to a registry the cluster pulls from (or load it into the nodes' container runtime), then pass --image with its reference", e.Spec)
}

// CheckImage refuses an image setting that is a path (a Dockerfile, a
// devcontainer.json) rather than a reference (sandbox.ClassifyImage).
func CheckImage(spec string) error {
	kind, ref := sandbox.ClassifyImage(spec)
	if kind != sandbox.KindReference {
		return &ImageError{Spec: ref}
	}
	if ref == "" || strings.ContainsAny(ref, " \t\n") {
		return fmt.Errorf("image %q is not an image reference", ref)
	}
	return nil
}

var userNameSafe = strings.NewReplacer(":", "", "\n", "", " ", "", "'", "", "\\", "")

func hostUserName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		if n := userNameSafe.Replace(u.Username); n != "" && len(n) <= 32 {
			return n
		}
	}
	return "shiro"
}
