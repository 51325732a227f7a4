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
//	               dial   {id, port, token}     connect to 127.0.0.1:port (then [::1]:port)
//	               data   {id, data, eof}       bytes of connection id; eof: the sender's half-close
//	               ack    {id, n}               n more bytes of id's may be sent (the window)
//	               close  {id}                  connection id is closed (either side sends it)
//	               listeners {id}               the sandbox's listening TCP sockets
//	helper → host  started {id, marker, pid}
//	               out     {id, stream: 1|2, data}
//	               exit    {id, result} or {id, error, code} when it never started
//	               error   {id, error}           a request the helper refused
//	               log     {error}               diagnostics, id 0
//	               state   {state}               id 0: the session's watched state changed
//	                                             (sent before the exit of the command after
//	                                             which it was seen)
//	               dialed  {id, pass}            the dial succeeded; pass: its socket went to the
//	                                             host over the pass socket, else data follows
//	               error   {id, error, code}     also a dial that failed (code refused: nothing
//	                                             listens)
//	               data, ack, close              as above, for the connection's other direction
//	               listening {id, listeners}     the answer to listeners
//
// For one id, started comes before any out, and nothing comes after exit.
// started waits for the command's first output, its exit or 10 ms,
// whichever comes first, so a short command's started, state and exit reach
// the host in one write. Closing the host→helper stream ends the session:
// the helper kills every process the session started.
//
// A connection (dial) has the id of its dial. With a pass socket
// (ServeOptions.PassSocket, Client's WithPassListener) the helper hands
// the dialed socket itself to the host: it connects to the pass socket
// and sends the dial's token, a line, with the socket's descriptor
// (SCM_RIGHTS), before it answers dialed {pass: true}; the token travels
// the other way only inside the channel, so nothing else in the sandbox
// can pass a socket off as the dial's. Without one, the bytes travel as
// data messages: each side may have at most DialWindow bytes of a
// connection unacknowledged, and acknowledges what its consumer read, so
// that a slow consumer holds up its own connection only, never the
// channel's reader. Closing the session ends every connection.
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

	TypeDial      = "dial"
	TypeDialed    = "dialed"
	TypeData      = "data"
	TypeAck       = "ack"
	TypeClose     = "close"
	TypeListeners = "listeners"
	TypeListening = "listening"
)

// DialWindow is how many bytes of one connection either side may send
// before the other acknowledges them.
const DialWindow = 1 << 20

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
	CodeRefused  = "refused"   // sandbox.ErrNothingListens: a dial found nothing on the port
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

	// dial, dialed, ack, listening
	Port      int                `json:"port,omitempty"`
	Token     string             `json:"token,omitempty"`
	Pass      bool               `json:"pass,omitempty"`
	N         int                `json:"n,omitempty"`
	Listeners []sandbox.Listener `json:"listeners,omitempty"`

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
	case CodeRefused:
		return sandbox.ErrNothingListens
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
