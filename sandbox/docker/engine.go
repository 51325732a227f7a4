package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/moby/moby/client"
)

// ErrEngineUnreachable wraps every failure to reach the Docker Engine.
var ErrEngineUnreachable = errors.New("docker engine unreachable")

// Engine is a connection to a Docker Engine.
type Engine struct {
	api  *client.Client
	host string
}

// Connect opens a client from the environment (DOCKER_HOST and friends),
// negotiates the API version (engines as old as API 1.41 work) and checks
// the engine answers.
func Connect(ctx context.Context) (*Engine, error) {
	api, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEngineUnreachable, err)
	}
	e := &Engine{api: api, host: api.DaemonHost()}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		api.Close()
		return nil, &UnreachableError{Host: e.host, Err: err}
	}
	return e, nil
}

// API exposes the client for the commands that need more than the sandbox
// (image builds, the interactive shell).
func (e *Engine) API() *client.Client { return e.api }

// Host is the engine address in use.
func (e *Engine) Host() string { return e.host }

// Close releases the client.
func (e *Engine) Close() error { return e.api.Close() }

// UnreachableError says which engine could not be reached and what to do.
type UnreachableError struct {
	Host string
	Err  error
}

func (e *UnreachableError) Error() string {
	dh := os.Getenv("DOCKER_HOST")
	if dh == "" {
		dh = "unset, so " + e.Host
	}
	return fmt.Sprintf("cannot reach the Docker engine (DOCKER_HOST=%s): %v. Start Docker or point DOCKER_HOST at a running engine, or run with --no-sandbox to use the host instead.", dh, e.Err)
}

func (e *UnreachableError) Unwrap() []error { return []error{ErrEngineUnreachable, e.Err} }
