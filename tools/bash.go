package tools

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/jobs"
)

//go:embed bash.md
var bashDoc string

var bashGuidance, bashDescription = SplitDoc(bashDoc)

// Bash timeouts, in milliseconds.
const (
	BashDefaultTimeout = 120_000
	BashMinTimeout     = 1_000
	BashMaxTimeout     = 600_000
)

// InterruptedMessage opens the result of a command the user interrupted.
const InterruptedMessage = "The user interrupted this command. It did not finish, so its effects are unknown."

type bashParams struct {
	Command         string `json:"command" jsonschema:"the shell command to run"`
	Timeout         *int   `json:"timeout,omitempty" jsonschema:"milliseconds, 1000-600000, default 120000"`
	RunInBackground bool   `json:"run_in_background,omitempty"`
	Stdin           bool   `json:"stdin,omitempty"`
}

// What a background command's result shows of its first output: what it
// printed within firstWait, at most firstLimit bytes.
const (
	firstWait  = time.Second
	firstLimit = 2048
)

// Bash runs a shell command in the sandbox.
type Bash struct{}

// NewBash returns the bash tool.
func NewBash() Tool { return Bash{} }

func (Bash) Name() string        { return "bash" }
func (Bash) Set() Set            { return SetCore }
func (Bash) Gated() bool         { return true }
func (Bash) Description() string { return bashDescription }
func (Bash) Guidance() string    { return bashGuidance }
func (Bash) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer","minimum":1000,"maximum":600000,"default":120000,"description":"Milliseconds."},"run_in_background":{"type":"boolean","description":"A job that runs across turns; returns its id (job-1) and first output. Read it with job_output, stop it with job_kill."},"stdin":{"type":"boolean","description":"With run_in_background: a stdin for job_input (else end-of-file)."}},"required":["command"]}`)
}

// Run implements Tool. A command the user interrupted (ctx cancelled) is an
// error result for the model, never a normal exit: its effects are unknown.
func (Bash) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var p bashParams
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Errorf("Invalid input for bash: %v", err), nil
	}
	if strings.TrimSpace(p.Command) == "" {
		return Errorf("Invalid input for bash: command is empty"), nil
	}
	if p.Stdin && !p.RunInBackground {
		return Errorf("Invalid input for bash: stdin is only for run_in_background commands"), nil
	}
	if p.RunInBackground {
		return runBackground(ctx, env, p)
	}
	timeout := BashDefaultTimeout
	if p.Timeout != nil {
		timeout = *p.Timeout
		if timeout < BashMinTimeout || timeout > BashMaxTimeout {
			return Errorf("Invalid input for bash: timeout must be between %d and %d ms, got %d", BashMinTimeout, BashMaxTimeout, timeout), nil
		}
	}
	var stdout, stderr headBuffer
	res, err := env.Sandbox.Run(ctx, sandbox.Command{
		Shell:   p.Command,
		Dir:     env.Workspace,
		Timeout: time.Duration(timeout) * time.Millisecond,
		Stdout:  streamTo(&stdout, env.Output, "stdout"),
		Stderr:  streamTo(&stderr, env.Output, "stderr"),
	})
	if res.Interrupted || (err != nil && ctx.Err() != nil) {
		body := outputBlocks(&stdout, &stderr)
		if body == "" {
			body = "(no output before it was killed)"
		}
		return Result{Text: Cap(strings.Join(append([]string{InterruptedMessage + "\n" + body}, noticeLines(res.Notices)...), "\n\n")), IsError: true, Exit: &Exit{Code: res.ExitCode, Interrupted: true, Signal: res.Signal}}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("run bash command: %w", err)
	}
	exit := &Exit{Code: res.ExitCode, TimedOut: res.TimedOut, Signal: res.Signal}
	exit.Killed = res.Signal != "" && !res.TimedOut
	parts := []string{fmt.Sprintf("exit: %d", res.ExitCode)}
	if res.Signal != "" {
		parts = append(parts, fmt.Sprintf("(killed by %s; timeout is %dms)", res.Signal, timeout))
	}
	if res.OutOfMemory {
		parts = append(parts, "(out of memory: the sandbox's memory limit was reached and a process was killed; raise it with --memory)")
	}
	if res.Shell == "sh" {
		parts = append(parts, "(the sandbox image has no bash; this ran with sh -c)")
	}
	if body := outputBlocks(&stdout, &stderr); body != "" {
		parts = append(parts, body)
	}
	return Result{Text: Cap(strings.Join(append(parts, noticeLines(res.Notices)...), "\n\n")), Exit: exit}, nil
}

// runBackground starts p's command as a job and returns its id, pid and
// first output (or its end, when it ended that soon).
func runBackground(ctx context.Context, env *Env, p bashParams) (Result, error) {
	if env.Jobs == nil {
		return Errorf("Background commands are not available here: nothing outlives this call (run it in a session)"), nil
	}
	j, err := env.Jobs.Start(ctx, jobs.Spec{Command: p.Command, Dir: env.Workspace, Stdin: p.Stdin})
	if errors.Is(err, jobs.ErrTooMany) {
		return Errorf("Cannot start another background job: %v", err), nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("start background job: %w", err)
	}
	j.First(ctx, firstWait, firstLimit)
	first := j.Output().Since(0)
	st := j.Status()
	var head string
	if st.Running() {
		pid := "pid unknown yet"
		if st.Pid > 0 {
			pid = fmt.Sprintf("pid %d", st.Pid)
		}
		head = fmt.Sprintf("%s started in the background (%s). It keeps running across turns; read its output with job_output, stop it with job_kill", st.ID, pid)
		if st.Stdin {
			head += ", write to its stdin with job_input"
		}
		head += "."
		if p.Timeout != nil {
			head += " (The timeout does not apply to background jobs.)"
		}
	} else {
		j.MarkTold()
		head = fmt.Sprintf("%s %s after %s.", st.ID, st.Ending(), time.Since(st.Started).Round(time.Millisecond))
	}
	parts := []string{head}
	data := first.Data
	if st.Running() && len(data) > firstLimit {
		data = data[:firstLimit]
	}
	if out := strings.TrimSpace(TextOrBinary(data)); out != "" {
		parts = append(parts, fmt.Sprintf("output (bytes 0-%d of %d):\n%s", len(data), first.Next, out))
	} else {
		parts = append(parts, map[bool]string{true: "(no output yet)", false: "(no output)"}[st.Running()])
	}
	return Result{Text: Cap(strings.Join(parts, "\n\n"))}, nil
}

// noticeLines renders what the sandbox did around a command, one
// "[notice]" line each, as one block (none when there is nothing).
func noticeLines(notices []string) []string {
	if len(notices) == 0 {
		return nil
	}
	lines := make([]string, len(notices))
	for i, n := range notices {
		lines[i] = "[notice] " + n
	}
	return []string{strings.Join(lines, "\n")}
}

// outputBlocks renders the non-empty streams as `stdout:` / `stderr:` blocks.
func outputBlocks(stdout, stderr *headBuffer) string {
	var blocks []string
	if s := stdout.text(); s != "" {
		blocks = append(blocks, "stdout:\n"+s)
	}
	if s := stderr.text(); s != "" {
		blocks = append(blocks, "stderr:\n"+s)
	}
	return strings.Join(blocks, "\n\n")
}

// streamTo writes into buf and forwards each chunk to the live listener.
func streamTo(buf *headBuffer, live func(string, []byte), stream string) *liveWriter {
	return &liveWriter{buf: buf, live: live, stream: stream}
}

type liveWriter struct {
	buf    *headBuffer
	live   func(string, []byte)
	stream string
}

func (w *liveWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if w.live != nil {
		w.live(w.stream, p)
	}
	return len(p), nil
}

// headBuffer keeps the first headLimit bytes of a stream and counts the
// rest, so a command printing gigabytes cannot exhaust memory.
type headBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int
}

const headLimit = 1 << 20

func (b *headBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := headLimit - b.buf.Len()
	if room < len(p) {
		b.dropped += len(p) - max(room, 0)
		p = p[:max(room, 0)]
	}
	b.buf.Write(p)
}

// text is the trimmed output, binary runs described (TextOrBinary), with a
// note when the stream was cut here.
func (b *headBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(TextOrBinary(b.buf.Bytes()))
	if b.dropped > 0 {
		s += fmt.Sprintf("\n... [%d more bytes not kept]", b.dropped)
	}
	return s
}
