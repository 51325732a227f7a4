package docker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// ErrEngineUnreachable wraps every failure to reach the Docker Engine.
var ErrEngineUnreachable = errors.New("docker engine unreachable")

// Engine is a connection to a Docker Engine.
type Engine struct {
	api *client.Client
	// ctr is the same client as api, seen through the calls the
	// container code makes (a fake in unit tests).
	ctr containerAPI
	// frz and procs freeze and clear a container at the end of its last
	// session (settle.go).
	frz   freezeAPI
	procs hostProcs
	host  string
	// context is the docker context the engine came from ("" for none).
	context string
	// stateDir holds shiro's sandbox state on the host: the owner key and
	// the per-workspace session markers.
	stateDir string
	ownerKey []byte
	reg      registry
}

// ConnectOption configures Connect.
type ConnectOption func(*connectOptions)

type connectOptions struct{ stateDir string }

// WithStateDir names the directory of the sandbox's host-side state (the
// owner key, session markers); default the data directory's "sandbox".
func WithStateDir(dir string) ConnectOption {
	return func(o *connectOptions) { o.stateDir = dir }
}

// Connect opens a client from the environment (DOCKER_HOST and friends),
// negotiates the API version (engines as old as API 1.41 work) and checks
// the engine answers.
func Connect(ctx context.Context, opts ...ConnectOption) (*Engine, error) {
	var o connectOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.stateDir == "" {
		dir, err := defaultStateDir()
		if err != nil {
			return nil, err
		}
		o.stateDir = dir
	}
	key, err := loadOwnerKey(o.stateDir)
	if err != nil {
		return nil, err
	}
	ep, err := resolveEndpoint()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEngineUnreachable, err)
	}
	copts, lastError, err := ep.clientOptions()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEngineUnreachable, err)
	}
	api, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEngineUnreachable, err)
	}
	e := &Engine{api: api, ctr: api, frz: api, procs: pidfds{}, host: ep.address(), context: ep.Context, stateDir: o.stateDir, ownerKey: key, reg: registry{dir: filepath.Join(o.stateDir, "owned")}}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		api.Close()
		if why := lastError(); why != "" {
			err = fmt.Errorf("%w (%s)", err, why)
		}
		why, fix := diagnose(context.WithoutCancel(ctx), ep, err)
		return nil, &UnreachableError{Host: e.host, Err: err, Why: why, Fix: fix}
	}
	return e, nil
}

// API exposes the client for the commands that need more than the sandbox
// (image builds, the interactive shell).
func (e *Engine) API() *client.Client { return e.api }

// Host is the engine address in use.
func (e *Engine) Host() string { return e.host }

// DefaultIsLocal reports whether the engine Connect would reach runs on
// this machine (see Engine.Local), without reaching it. An endpoint that
// cannot be resolved counts as local: Connect will say what is wrong.
func DefaultIsLocal() bool {
	ep, err := resolveEndpoint()
	return err != nil || ep.local()
}

// Context is the docker context the engine came from ("" when DOCKER_HOST
// or the default socket chose it).
func (e *Engine) Context() string { return e.context }

// Local reports whether the engine runs on this machine (a unix:// host)
// and can therefore bind-mount its directories. An engine reached over
// TCP or SSH counts as remote, even on this machine.
func (e *Engine) Local() bool { return strings.HasPrefix(e.host, "unix://") }

// Close releases the client.
func (e *Engine) Close() error { return e.api.Close() }
