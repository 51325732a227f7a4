// Package tools holds shiro's built-in tools (one file and one embedded
// description each), the ignore-aware walker they share, the output cap and
// binary rule, and the registry that decides which tools are offered.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/jobs"
)

// Set names a group of built-in tools that config can switch on or off.
type Set string

// The tool sets. Core is always on.
const (
	SetCore     Set = "core"
	SetEditPlus Set = "edit-plus"
	SetGit      Set = "git"
	SetNone     Set = "" // session, plugin and MCP tools belong to no set
)

// Env is what a tool call can reach. One Env serves a whole session.
type Env struct {
	// Workspace is the absolute path of the workspace root (the same path
	// inside the sandbox container).
	Workspace string
	// Root is the workspace's root (workspace.Workspace.Root, the run's one
	// open of it); every host-side read goes through it, which refuses
	// escapes, symlinks included.
	Root *os.Root
	// Gate is the workspace's write gate: every host-side write goes
	// through it (no symlink followed, never into a git directory). The
	// file tools refuse to write without one.
	Gate *hostwrite.Gate
	// Sandbox runs commands (bash, rg, git).
	Sandbox sandbox.Sandbox
	// GoGit makes the git tools read the repository with go-git in this
	// process instead of running git (--no-sandbox: a repository's hooks,
	// fsmonitor, filters and diff drivers must never run on the host).
	// They also fall back to it when the sandbox has no git.
	GoGit bool
	// OpenGit reads the repository in this process (go-git); nil where
	// the git tools have nothing but the git program (in the sandbox).
	OpenGit GitOpener
	// Output, when set, receives live command output (bash streams here).
	Output func(stream string, chunk []byte)
	// Jobs runs the session's background commands (bash with
	// run_in_background, job_output, job_kill, job_input); nil where
	// nothing outlives a call (`shiro tool`): those calls then say so.
	Jobs *jobs.Manager
}

// Result is what the model sees for one call. IsError marks a result the
// model should read as a failed call (a bad path, no match, an ambiguous
// edit); such failures are results, not Go errors.
type Result struct {
	Text    string
	IsError bool
	// Exit says how a command ended (bash); nil for the other tools. It is
	// for the user's display: the model reads Text.
	Exit *Exit
}

// Exit is how a command ended.
type Exit struct {
	Code int
	// TimedOut: the command's timeout killed it.
	TimedOut bool
	// Interrupted: the user interrupted it (ctrl-c).
	Interrupted bool
	// Killed: a signal (named by Signal) ended it otherwise.
	Killed bool
	Signal string
}

// Checker is a tool that can tell, without doing anything, that a call
// would fail (an edit whose text is not in the file), so that the user is
// not asked to approve it.
type Checker interface {
	Check(ctx context.Context, env *Env, input json.RawMessage) (problem string)
}

// Errorf makes an error result for the model.
func Errorf(format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

// Text makes a successful result.
func Text(s string) Result { return Result{Text: s} }

// Tool is one capability offered to the model.
type Tool interface {
	Name() string
	// Set is the tool set the tool belongs to (SetNone for none).
	Set() Set
	// Gated tools ask for approval before each call.
	Gated() bool
	// Description is the text the model reads.
	Description() string
	// Schema is the JSON schema of the parameters object.
	Schema() json.RawMessage
	// Run executes one call. A Go error means the session cannot go on
	// (the sandbox is gone, the context was cancelled); everything the
	// model can act on is a Result.
	Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error)
}
