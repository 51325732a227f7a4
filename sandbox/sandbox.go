// Package sandbox declares where shiro's executing tools run: the Sandbox
// interface, the Command a tool asks to run and the Result it gets back.
//
// The backends (Backend, in backend.go) open it: sandbox/docker (a
// container per workspace, one long-lived command channel per session) and
// sandbox/kube (a pod per workspace); sandbox/local runs on the host, for
// --no-sandbox and fast tests. Each kills a command's whole process tree
// when its context is cancelled or its timeout passes.
package sandbox

import (
	"context"
	"errors"
	"io"
	"time"
)

// MarkerEnv is the environment variable every command carries. Its value is
// unique per command; a kill signals every process whose environment holds it,
// which catches children that left the process group (setsid, nohup, double
// forks).
const MarkerEnv = "SHIRO_CMD"

// Default limits of a sandbox container (config shows them and refuses a
// project raising them; sandbox/docker applies them).
const (
	DefaultPids   = 1024
	DefaultMemory = 4 << 30 // bytes
	DefaultCPUs   = 2.0
)

// Command is one process to run in the sandbox.
type Command struct {
	// Args is the argv to execute. When empty, Shell is run through the
	// sandbox's shell (bash -c with the session's login environment, or
	// sh -c where the image has no bash).
	Args []string
	// Shell is a shell command line, used when Args is empty.
	Shell string
	// Dir is the working directory; empty means the workspace root.
	Dir string
	// Env holds extra KEY=VALUE pairs on top of the sandbox's base environment.
	Env []string
	// Timeout kills the command's tree when it passes; zero means none.
	Timeout time.Duration
	// Stdin, when set, is copied to the command's standard input until EOF.
	Stdin io.Reader
	// Stdout and Stderr receive output as it is produced; nil discards it.
	Stdout, Stderr io.Writer
	// Started, when set, is told the command's pid (in the sandbox's pid
	// namespace; also its process group) once it has started, before any
	// output. Background jobs show it.
	Started func(pid int)
}

// Validate reports a command that cannot be run.
func (c Command) Validate() error {
	if len(c.Args) == 0 && c.Shell == "" {
		return errors.New("command has neither argv nor a shell string")
	}
	if c.Timeout < 0 {
		return errors.New("negative timeout")
	}
	return nil
}

// Result is how a command ended.
type Result struct {
	// ExitCode is the process's exit status, or 128+signal when a signal
	// ended it (as a shell reports it).
	ExitCode int `json:"exitCode"`
	// Signal names the signal that ended the process ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`
	// TimedOut is set when Command.Timeout passed and the tree was killed.
	TimedOut bool `json:"timedOut,omitempty"`
	// OutOfMemory is set when the sandbox's memory limit killed a process
	// while the command ran.
	OutOfMemory bool `json:"outOfMemory,omitempty"`
	// Interrupted is set when the context was cancelled and the tree killed.
	Interrupted bool `json:"interrupted,omitempty"`
	// Shell is the shell that ran Command.Shell ("bash" or "sh").
	Shell string `json:"shell,omitempty"`
	// Duration is the wall time from start to the result.
	Duration time.Duration `json:"duration"`
	// Notices says what the sandbox did around the command that the user
	// and the model should know: a git repository the command made in the
	// workspace was moved out of the host's reach, a git change stayed in
	// the sandbox.
	Notices []string `json:"notices,omitempty"`
}

// Info describes a sandbox for headers, `sandbox ls` and diagnostics.
type Info struct {
	Kind      string // "docker", "kubernetes" or "local"
	Workspace string
	Image     string
	// ImageDigest is the image the sandbox runs, exactly: the registry's
	// digest of a pulled image ("sha256:…"), or the local image id of one
	// that came from no registry (a build). Empty when not known.
	ImageDigest string
	Container   string
	// Helper is the path of shiro's helper inside the sandbox, for
	// commands that run it (copy mode's file tools); empty on the host.
	Helper string
	// Copy is set when the sandbox holds a copy of the workspace (copy
	// mode) rather than the directory itself.
	Copy bool
	// Engine is where the sandbox runs, when it is not this machine's
	// default: the engine's address, the cluster's context.
	Engine string
	// Place says where the sandbox runs, in words, for notices: "the
	// Docker engine at tcp://…".
	Place string
}

// Sandbox runs commands for one workspace.
type Sandbox interface {
	// Run starts cmd and blocks until it ends. Cancelling ctx kills the
	// command's whole process tree; Run then returns the Result (with
	// Interrupted set) together with ctx's error. A non-nil error without a
	// Result means the sandbox itself failed.
	Run(ctx context.Context, cmd Command) (Result, error)
	// Info describes the sandbox.
	Info() Info
	// Close kills every process this session started and releases the
	// session's resources. The container (if any) stays for the next session.
	Close() error
}

// Sentinel errors shared by the implementations.
var (
	// ErrClosed is returned by Run after Close.
	ErrClosed = errors.New("sandbox is closed")
	// ErrNoShell means the image has neither bash nor sh.
	ErrNoShell = errors.New("the sandbox image has no shell (neither bash nor sh)")
)
