package helper

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// A short shell command spends most of its time in starting bash: the exec,
// the dynamic loader, bash's own set-up, all the slower after the pause of a
// model's turn. So once a shell command has run, a Runner starts the next
// one's bash ahead: a warm shell, `bash -c '. /dev/fd/3'` under a reaper,
// with the login environment, in the command's directory, stdin on
// /dev/null, its output pipes made, its marker set. It waits on descriptor
// 3, a pipe. The next shell command that fits it (no stdin, the same
// directory, a script of at most warmScriptMax bytes) writes its script
// there and closes it: bash reads the script whole before it runs any of
// it; the script's first words close descriptor 3 and export the command's
// own variables, on its first line, so that line numbers stay the
// script's. A command that does not fit, or finds the warm shell gone
// (something killed it), starts its own bash as before.
//
// What differs from `bash -c script`: bash forks the script's last command
// instead of becoming it, syntax errors name no "-c: line N", and
// BASH_SOURCE and ps show /dev/fd/3.

// warmLoader is the warm shell's command string.
const warmLoader = ". /dev/fd/3"

// warmScriptMax is the largest script a warm shell takes: what a pipe
// buffers however few pages the user may still have (PIPE_BUF), so that
// writing it never waits for bash.
const warmScriptMax = 4096

// warmShell is a started bash waiting for its script.
type warmShell struct {
	p      *Process
	script *os.File // the write end of its descriptor 3
	dir    string
}

// shellWarmer holds a Runner's warm shell.
type shellWarmer struct {
	mu       sync.Mutex
	shell    *warmShell
	starting chan struct{} // closed when the start under way ends; nil when none
	paused   bool          // while KillSession runs: nothing starts
	wg       sync.WaitGroup
}

// warmShellStart bounds how long a command waits for a warm shell that is
// being started (the reaper's fork and exec) before it starts its own.
const warmShellStart = 50 * time.Millisecond

// claimShell returns the warm shell running cmd's script, c being the bash
// command cmd would start otherwise; ok is false when cmd must start c.
func (r *Runner) claimShell(ctx context.Context, cmd sandbox.Command, c *exec.Cmd) (p *Process, ok bool) {
	if r.pool == nil || len(cmd.Args) > 0 || cmd.Stdin != nil {
		return nil, false
	}
	script, ok := warmScript(cmd)
	if !ok {
		return nil, false
	}
	w := &r.warm
	w.mu.Lock()
	if starting := w.starting; w.shell == nil && starting != nil {
		w.mu.Unlock()
		t := time.NewTimer(warmShellStart)
		select {
		case <-starting:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		w.mu.Lock()
	}
	s := w.shell
	if s == nil || s.dir != c.Dir {
		w.mu.Unlock()
		return nil, false
	}
	w.shell = nil
	w.mu.Unlock()

	if closed(s.p.exited) {
		s.discard()
		return nil, false
	}
	p = s.p
	p.ctx, p.timeout = ctx, cmd.Timeout
	p.oomBefore, p.oomKnown = p.oom.read()
	p.started = time.Now()
	_, err := s.script.WriteString(script)
	if cerr := s.script.Close(); err == nil {
		err = cerr
	}
	if err != nil { // bash is gone
		s.discard()
		return nil, false
	}
	p.attach(cmd)
	return p, true
}

// warmScript is what a warm shell reads for cmd; ok is false when cmd does
// not fit one.
func warmScript(cmd sandbox.Command) (string, bool) {
	var b strings.Builder
	b.WriteString("exec 3<&-;")
	for _, kv := range withoutMarker(cmd.Env) {
		k, v, _ := strings.Cut(kv, "=")
		if !shellName(k) {
			return "", false
		}
		b.WriteString(" export ")
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(shellQuote(v))
		b.WriteString(";")
	}
	b.WriteString(" ")
	b.WriteString(cmd.Shell)
	if b.Len() > warmScriptMax || strings.IndexByte(cmd.Shell, 0) >= 0 {
		return "", false
	}
	return b.String(), true
}

// shellName reports whether k can be a shell variable's name.
func shellName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, c := range []byte(k) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// warmAfter has the next shell command's bash started ahead once p, a bash
// started from the login environment in dir, has been waited for.
func (r *Runner) warmAfter(p *Process, bash string, env []string, dir string) {
	if r.pool == nil {
		return
	}
	p.done = func() { r.warmShell(bash, env, dir) }
}

// warmShell starts a warm shell in the background unless one is ready or
// being started.
func (r *Runner) warmShell(bash string, env []string, dir string) {
	w := &r.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shell != nil || w.starting != nil || w.paused {
		return
	}
	starting := make(chan struct{})
	w.starting = starting
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(starting)
		s, err := r.startWarmShell(bash, env, dir)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.starting = nil
		if err == nil {
			w.shell = s
		}
	}()
}

// startWarmShell starts a bash that waits for its script on descriptor 3.
func (r *Runner) startWarmShell(bash string, env []string, dir string) (*warmShell, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	c := &exec.Cmd{Path: bash, Args: []string{"bash", "-c", warmLoader}, Dir: dir}
	c.Env = append(append(make([]string, 0, len(env)+2), env...), "PWD="+dir)
	c.SysProcAttr = sysProcAttr()
	id := r.seq.Add(1)
	marker := r.sessionID + "." + strconv.FormatUint(id, 10)
	c.Env = append(c.Env, MarkerEntry(marker))
	p := r.newProcess(context.Background(), sandbox.Command{}, "bash", id, marker)
	if err := p.spawn(c, nil, r.pool, []*os.File{pr}); err != nil {
		_ = pw.Close()
		return nil, err
	}
	return &warmShell{p: p, script: pw, dir: dir}, nil
}

// discard ends a warm shell that will run nothing: without a script, bash
// exits at once.
func (s *warmShell) discard() {
	_ = s.script.Close()
	s.p.ctx = context.Background()
	s.p.attach(sandbox.Command{})
	_, _ = s.p.Wait()
}

// pause ends the warm shell, and one being started; until resume, none
// starts.
func (w *shellWarmer) pause() {
	w.mu.Lock()
	w.paused = true
	s := w.shell
	w.shell = nil
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	if s == nil {
		s = w.shell
	}
	w.shell = nil
	w.mu.Unlock()
	if s != nil {
		s.discard()
	}
}

// resume lets warm shells start again after pause.
func (w *shellWarmer) resume() {
	w.mu.Lock()
	w.paused = false
	w.mu.Unlock()
}
