package sandbox

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shiroagent/shiro/internal/workspace"
)

// Spec is what opening a workspace's sandbox takes, whatever the backend:
// the user's Settings and what the session adds. A backend's own options
// embed it and add their few extras.
type Spec struct {
	// Settings are the user's choices (config.Config.Sandbox), passed
	// whole. Env is resolved once, with LookupEnv, and reaches every
	// command's exec, never the sandbox's own configuration.
	Settings
	// Workspace is the absolute host path; the sandbox holds the workspace
	// (or its copy) at the same path.
	Workspace string
	// Opened is the workspace opened once for the run (its Path is
	// Workspace): the backend reads and writes the workspace on the host
	// through it and leaves it open. Nil: the backend opens Workspace
	// itself, once, and closes it with the sandbox.
	Opened *workspace.Workspace
	// LookupEnv reads the host environment for Env's bare names; default
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Egress serves the connections commands make in ask mode; nil leaves
	// an ask-mode sandbox without any way out.
	Egress Egress
	// UID and GID run every command; default the current user's.
	UID, GID int
	// UserName names the passwd entry made for UID; default the host's name.
	UserName string
	// HelperBinary is a static Linux build of the helper (shiro-helper, or
	// shiro itself) put into the sandbox; default helper.FindBinary.
	HelperBinary string
	// Version is shiro's version, recorded on what the backend makes.
	Version string
	// Progress receives human-readable lines while the sandbox starts.
	Progress io.Writer
	// Notices receives what the sandbox did outside a command (when the
	// session opens or closes); nil writes them to Progress.
	Notices func(string)
}

// ProgressTotals is what a Spec.Progress writer implements to get the
// totals of an image build or pull as numbers, beside its lines: what is
// "build" or "pull", done and total count its steps (a build's steps, a
// pull's layers). The total may grow as the engine finds more to do.
type ProgressTotals interface {
	ProgressTotals(what string, done, total int)
}

// Backend is one engine sandboxes run on. A backend is one package and
// one Register call; --backend, the sandbox.backend key, `shiro sandbox`,
// `shiro image` and doctor find it here by name.
type Backend interface {
	// Name is what --backend and sandbox.backend call it.
	Name() string
	// DefaultWorkspaceMode is how its sandboxes hold the workspace when
	// the settings do not say: WorkspaceMount or WorkspaceCopy.
	DefaultWorkspaceMode(Settings) string
	// Open opens a session in the workspace's sandbox, making the sandbox
	// and getting its image ready (built, pulled) first when needed.
	Open(context.Context, Spec) (Sandbox, error)
	// Manage reaches the engine the settings choose, for `shiro sandbox`.
	Manage(context.Context, Settings) (Manager, error)
	// Doctor checks what the backend needs, one line each, opening a
	// sandbox as Open would (but pulling nothing).
	Doctor(context.Context, Spec, Report)
	// PlanImage says what opening would do with the settings' image,
	// without the engine and without running anything, for the trust
	// question; it reads the workspace w through w's root.
	PlanImage(w *workspace.Workspace, s Settings) (ImagePlan, error)
	// BuildImage makes the built-in image and returns its reference.
	BuildImage(context.Context, ImageBuild) (string, error)
}

// Manager lists and ends one engine's sandboxes (every workspace's of this
// user). Each call says what it acts on through report, before it acts.
type Manager interface {
	// List returns the sandboxes of workspace ws ("" for every workspace).
	List(ctx context.Context, ws string) ([]Entry, error)
	// Stop stops the running sandboxes of ws ("" for every workspace).
	Stop(ctx context.Context, ws string, report func(Item)) error
	// Remove removes the sandboxes of ws ("" for every workspace) and what
	// holds their state (HOME, the workspace's copy).
	Remove(ctx context.Context, ws string, report func(Item)) error
	// Prune removes what no session will use again: stopped sandboxes and
	// the sandboxes and state of workspaces that are gone. A dry run only
	// reports.
	Prune(ctx context.Context, dryRun bool, report func(Item)) error
	// Close lets go of the engine.
	Close() error
}

// Entry is one sandbox in `shiro sandbox ls`.
type Entry struct {
	Backend   string `json:"backend"`
	Workspace string `json:"workspace"`
	// Name is the backend's name for it (a container, a pod); Shown is
	// how the listing writes it ("pod/<namespace>/<name>"), Name when
	// empty.
	Name      string `json:"container"`
	Shown     string `json:"-"`
	ID        string `json:"id,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Claim is the storage that holds the sandbox's workspace and HOME,
	// where the backend names it apart from the sandbox.
	Claim    string    `json:"claim,omitempty"`
	Image    string    `json:"image"`
	State    string    `json:"state"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"lastUsed,omitzero"`
	// Orphaned is set when the workspace directory no longer exists.
	Orphaned bool `json:"orphaned,omitempty"`
}

// String is the entry as the listing and the reports write it.
func (e Entry) String() string {
	if e.Shown != "" {
		return e.Shown
	}
	return e.Name
}

// Item is one thing a Manager call acts on: a sandbox, a volume, a claim.
type Item struct {
	// Kind says what it is ("container", "volume", "pod", "claim").
	Kind string
	// Name is how to write it.
	Name string
	// Workspace and State, when known.
	Workspace, State string
}

// Report receives a doctor's checks: a passed one and a failed one with
// what to do about it.
type Report interface {
	OK(name, format string, args ...any)
	Fail(name, problem, fix string)
}

// ImagePlan says what resolving an image setting would do: the trust
// question shows it before any of it happens.
type ImagePlan struct {
	Kind ImageKind
	// Ref is the image reference to run (a reference, or a
	// devcontainer.json's "image"); empty for a build.
	Ref string
	// Source is the Dockerfile or devcontainer.json named (absolute).
	Source string
	// Dockerfile is the Dockerfile a build would use (absolute); empty
	// when nothing is built.
	Dockerfile string
	// Bases are the images the Dockerfile's FROM lines name, in order
	// (stages named by an earlier "AS" left out).
	Bases []string
	// BuildNetwork is the network a build's RUN steps get: NetworkOpen or
	// NetworkNone.
	BuildNetwork string
}

// ImageBuild asks a backend for its built-in image.
type ImageBuild struct {
	// IfMissing does nothing when the image is present.
	IfMissing bool
	// Offline makes it without pulling a base image; Online only from
	// the Dockerfile. Neither: the Dockerfile, else offline.
	Offline, Online bool
	Progress        io.Writer
}

// ShownPath is p relative to the workspace when it is inside it ("./x"),
// else p.
func ShownPath(ws, p string) string {
	if rel, err := filepath.Rel(ws, p); err == nil && filepath.IsLocal(rel) {
		return "." + string(filepath.Separator) + rel
	}
	return p
}

// DefaultBackend is the backend of empty settings.
const DefaultBackend = BackendDocker

var registry struct {
	sync.Mutex
	backends map[string]Backend
}

// Register makes b available by its name. Registering a name twice is a
// programming error.
func Register(b Backend) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.backends[b.Name()]; dup {
		panic("sandbox: backend " + b.Name() + " registered twice")
	}
	if registry.backends == nil {
		registry.backends = map[string]Backend{}
	}
	registry.backends[b.Name()] = b
}

// Lookup finds the backend name calls ("" is DefaultBackend).
func Lookup(name string) (Backend, error) {
	if name == "" {
		name = DefaultBackend
	}
	registry.Lock()
	b, ok := registry.backends[name]
	registry.Unlock()
	if !ok {
		return nil, fmt.Errorf("no sandbox backend %q (there are: %s)", name, strings.Join(Backends(), ", "))
	}
	return b, nil
}

// Backends are the registered backends' names, DefaultBackend first and
// the others sorted.
func Backends() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.backends))
	for n := range registry.backends {
		if n != DefaultBackend {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if _, ok := registry.backends[DefaultBackend]; ok {
		names = append([]string{DefaultBackend}, names...)
	}
	return names
}
