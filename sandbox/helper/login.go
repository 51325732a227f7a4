package helper

import (
	"bytes"
	"context"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// A login shell reads /etc/profile, /etc/profile.d and the user's profile,
// which is what puts an image's toolchain on PATH; reading them costs as
// much again as the command itself (bash -lc true takes about twice as long
// as bash -c true). So a Runner pays for the login once: the first shell
// command captures the environment a login shell ends with, and every
// shell command starts `bash -c` from it. What a profile sets other than
// exported variables (aliases, shell options, unexported functions) does
// not carry over, as it would not into a script either; a change to a
// profile made during the session applies from the next session on.

// loginCaptureTimeout bounds the capture; a profile that takes longer (or
// waits for input) leaves every command on bash -lc.
const loginCaptureTimeout = 10 * time.Second

// loginEnv is a Runner's captured login environment.
type loginEnv struct {
	mu   sync.Mutex
	done bool
	env  []string // nil when the capture failed: commands use bash -lc
}

// loginEnvironment returns the environment a login bash at path ends
// with, capturing it on the first call; nil when it could not be captured.
// The capture runs like any command (under a reaper, with a marker), so
// whatever a profile starts in the background dies with the session; a
// capture cut short by ctx is tried again by the next command.
func (r *Runner) loginEnvironment(ctx context.Context, bash string) []string {
	l := &r.login
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return l.env
	}
	var out bytes.Buffer
	res, err := r.captureLogin(ctx, bash, &out)
	if ctx.Err() != nil {
		return nil
	}
	l.done = true
	if err == nil && res.ExitCode == 0 {
		l.env = parseEnv0(out.Bytes())
	}
	return l.env
}

// loginEnv is the captured login environment; nil before the capture or
// when it failed.
func (r *Runner) loginEnv() []string {
	r.login.mu.Lock()
	defer r.login.mu.Unlock()
	return r.login.env
}

// loginID and the ".login" marker suffix set the capture apart from the
// session's numbered commands.
const loginID = math.MaxUint64

// captureLogin runs the login bash that prints its environment to out.
func (r *Runner) captureLogin(ctx context.Context, bash string, out *bytes.Buffer) (sandbox.Result, error) {
	cmd := sandbox.Command{Args: []string{bash, "-lc", "exec env -0"}, Stdout: out, Timeout: loginCaptureTimeout}
	c, _, err := r.command(ctx, cmd)
	if err != nil {
		return sandbox.Result{}, err
	}
	p, err := r.start(ctx, cmd, c, "", loginID, r.sessionID+".login")
	if err != nil {
		return sandbox.Result{}, err
	}
	return p.Wait()
}

// notInherited are the variables bash sets for itself, which each command's
// own bash sets again.
var notInherited = map[string]bool{"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

// parseEnv0 reads `env -0` output; nil when it holds no PATH.
func parseEnv0(out []byte) []string {
	var env []string
	hasPath := false
	for kv := range bytes.SplitSeq(out, []byte{0}) {
		k, _, ok := strings.Cut(string(kv), "=")
		if !ok || k == "" || notInherited[k] {
			continue
		}
		hasPath = hasPath || k == "PATH"
		env = append(env, string(kv))
	}
	if !hasPath {
		return nil
	}
	return withoutMarker(env)
}
