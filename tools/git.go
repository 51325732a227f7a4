package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/shiroagent/shiro/sandbox"
)

// GitTimeout bounds one git command.
const GitTimeout = 30 * time.Second

// gitSafety are the -c options every git command gets. git runs in the
// sandbox, so a hostile repository's config cannot reach the host; these
// keep the read-only tools read-only and free of repository-configured
// programs where git allows it (and matter when the sandbox is the host,
// under --no-sandbox): no fsmonitor daemon, no hooks (status may refresh
// the index), no signature checks through gpg.program, paths unquoted.
// The diff-producing commands also get --no-ext-diff and --no-textconv.
// Clean/smudge filters cannot be turned off by option; the sandbox is what
// contains them.
var gitSafety = []string{
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "log.showSignature=false",
	"-c", "core.quotePath=false",
}

// gitEnv is added to the sandbox's environment: no prompts, no pager,
// messages in English (the "not a git repository" test reads them), and
// no optional locks, so status never rewrites the index.
var gitEnv = []string{"GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "PAGER=cat", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0"}

// gitKeep bounds the output kept of one git command; the rest is counted.
const gitKeep = 1 << 20

// gitRun is one git command's outcome: its trimmed stdout (raw: as
// written), or failed set with the result the model sees.
type gitRun struct {
	out    string
	raw    string
	more   int // characters of stdout past gitKeep, not kept
	failed *Result
	stderr string
}

// runGit runs git with args in the sandbox, in the workspace. A Go error
// means the sandbox failed or ctx ended.
func runGit(ctx context.Context, env *Env, args ...string) (gitRun, error) {
	var stdout, stderr gitBuffer
	argv := append(append([]string{"git"}, gitSafety...), args...)
	res, err := env.Sandbox.Run(ctx, sandbox.Command{
		Args: argv, Dir: env.Workspace, Env: gitEnv, Timeout: GitTimeout,
		Stdout: &stdout, Stderr: &stderr,
	})
	switch {
	case ctx.Err() != nil:
		return gitRun{}, ctx.Err()
	case err != nil && (errors.Is(err, exec.ErrNotFound) || strings.Contains(err.Error(), "executable file not found")):
		return gitFailed("git is not installed or not on PATH."), nil
	case err != nil:
		return gitRun{}, fmt.Errorf("run git %s: %w", args[0], err)
	case res.ExitCode == 127:
		return gitFailed("git is not installed or not on PATH."), nil
	case res.TimedOut:
		return gitFailed(fmt.Sprintf("git %s timed out after %s.", args[0], GitTimeout)), nil
	}
	errText := strings.TrimSpace(stderr.text())
	if res.ExitCode != 0 {
		r := gitFailed(errText)
		r.stderr = errText
		switch {
		case strings.Contains(strings.ToLower(errText), "not a git repository"):
			r.failed.Text = env.Workspace + " is not a git repository."
		case errText == "":
			if out := strings.TrimSpace(stdout.text()); out != "" {
				r.failed.Text = out
			} else {
				r.failed.Text = fmt.Sprintf("git exited %d", res.ExitCode)
			}
		}
		r.failed.Text = Cap(r.failed.Text)
		return r, nil
	}
	raw := stdout.text()
	return gitRun{out: strings.TrimSpace(raw), raw: raw, more: stdout.dropped, stderr: errText}, nil
}

func gitFailed(msg string) gitRun {
	r := Errorf("%s", msg)
	return gitRun{failed: &r}
}

// gitResult is the tool's result for a run: the failure, the empty
// message, or the output capped (counting what was never kept).
func gitResult(r gitRun, empty string) Result {
	switch {
	case r.failed != nil:
		return *r.failed
	case r.out == "":
		return Text(empty)
	case r.more == 0:
		return Text(Cap(r.out))
	}
	cut, n := 0, 0
	for ; n < MaxOutput && cut < len(r.out); n++ {
		_, size := utf8.DecodeRuneInString(r.out[cut:])
		cut += size
	}
	removed := utf8.RuneCountInString(r.out[cut:]) + r.more
	return Text(r.out[:cut] + fmt.Sprintf("\n... [truncated %d chars]", removed))
}

// gitBuffer keeps the first gitKeep bytes and counts the characters (UTF-8
// sequence starts) of the rest.
type gitBuffer struct {
	mu      sync.Mutex
	buf     []byte
	dropped int
}

func (b *gitBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := gitKeep - len(b.buf); room > 0 {
		k := min(room, len(p))
		b.buf = append(b.buf, p[:k]...)
		p = p[k:]
	}
	for _, c := range p {
		if c&0xC0 != 0x80 {
			b.dropped++
		}
	}
	return n, nil
}

func (b *gitBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// gitTool is a git tool: params P decoded and checked against the schema,
// the run's result passed through as is (gitResult caps it).
type gitTool[P any] struct {
	name     string
	guidance string
	desc     string
	schema   json.RawMessage
	run      func(ctx context.Context, env *Env, p *P) (Result, error)
}

func newGitTool[P any](name, doc string, run func(context.Context, *Env, *P) (Result, error)) *gitTool[P] {
	guidance, desc := SplitDoc(doc)
	return &gitTool[P]{name: name, guidance: guidance, desc: desc, schema: schemaFor[P](), run: run}
}

func (t *gitTool[P]) Name() string            { return t.name }
func (t *gitTool[P]) Set() Set                { return SetGit }
func (t *gitTool[P]) Gated() bool             { return false }
func (t *gitTool[P]) Description() string     { return t.desc }
func (t *gitTool[P]) Guidance() string        { return t.guidance }
func (t *gitTool[P]) Schema() json.RawMessage { return t.schema }

// Run implements Tool.
func (t *gitTool[P]) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	p, msg := decodeParams[P](t.name, input)
	if p == nil {
		return Errorf("%s", msg), nil
	}
	return t.run(ctx, env, p)
}

// withPath appends "-- path" when path is set: a literal argument, never
// an option or shell text.
func withPath(args []string, path string) []string {
	if path == "" {
		return args
	}
	return append(args, "--", path)
}
