package helper

import (
	"errors"
	"io/fs"
	"os/exec"

	"github.com/shiroagent/shiro/sandbox"
)

// The protocol is a stream of JSON objects (encoding/json's Encoder and
// Decoder), one Message each, in both directions. The client picks each
// command's ID; every message about a command carries it.
//
//	host → helper  run    {id, args | shell, dir, env, timeoutMs, stdin}
//	               stdin  {id, data, eof}        only after run with stdin:true
//	               kill   {id}
//	helper → host  started {id, marker, pid}
//	               out     {id, stream: 1|2, data}
//	               exit    {id, result} or {id, error, code} when it never started
//	               error   {id, error}           a request the helper refused
//	               log     {error}               diagnostics, id 0
//	               state   {state}               id 0: the session's watched state changed
//	                                             (sent before the exit of the command after
//	                                             which it was seen)
//
// For one id, started comes before any out, and nothing comes after exit.
// started waits for the command's first output, its exit or 10 ms,
// whichever comes first, so a short command's started, state and exit reach
// the host in one write. Closing the host→helper stream ends the session:
// the helper kills every process the session started.
const (
	TypeRun     = "run"
	TypeStdin   = "stdin"
	TypeKill    = "kill"
	TypeStarted = "started"
	TypeOut     = "out"
	TypeExit    = "exit"
	TypeError   = "error"
	TypeLog     = "log"
	TypeState   = "state"
)

// Streams of an out message.
const (
	StreamStdout = 1
	StreamStderr = 2
)

// Codes an exit message carries with its error, so that the host can test
// the error with errors.Is as it would locally.
const (
	CodeNoShell  = "no_shell"  // sandbox.ErrNoShell
	CodeNotFound = "not_found" // exec.ErrNotFound: no such binary
	CodeNoDir    = "no_dir"    // fs.ErrNotExist: the working directory is missing
)

// Message is one frame of the protocol. Type says which fields are set.
type Message struct {
	ID   uint64 `json:"id"`
	Type string `json:"type"`

	// run
	Args      []string `json:"args,omitempty"`
	Shell     string   `json:"shell,omitempty"`
	Dir       string   `json:"dir,omitempty"`
	Env       []string `json:"env,omitempty"`
	TimeoutMs int64    `json:"timeoutMs,omitempty"`
	Stdin     bool     `json:"stdin,omitempty"`

	// stdin, out
	Stream int    `json:"stream,omitempty"`
	Data   []byte `json:"data,omitempty"`
	EOF    bool   `json:"eof,omitempty"`

	// started
	Marker string `json:"marker,omitempty"`
	Pid    int    `json:"pid,omitempty"`

	// state
	State string `json:"state,omitempty"`

	// exit, error, log
	Result *sandbox.Result `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Code   string          `json:"code,omitempty"`
}

// RemoteError is a command error the helper reported (the command could not
// start). It unwraps to the sentinel its code names.
type RemoteError struct {
	Code string
	Msg  string
}

func (e *RemoteError) Error() string { return e.Msg }

// Unwrap returns the sentinel for e.Code, or nil.
func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case CodeNoShell:
		return sandbox.ErrNoShell
	case CodeNotFound:
		return exec.ErrNotFound
	case CodeNoDir:
		return fs.ErrNotExist
	}
	return nil
}

// errorCode is the code an exit message carries for a start error.
func errorCode(err error) string {
	switch {
	case errors.Is(err, sandbox.ErrNoShell):
		return CodeNoShell
	case errors.Is(err, exec.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, fs.ErrNotExist):
		return CodeNoDir
	}
	return ""
}
