package helper

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/shiroagent/shiro/sandbox/gitshadow"
)

// Main is the helper's command line, the same in the small shiro-helper
// binary copied into containers and behind shiro's hidden `helper`
// command: init, serve, reap, kill and git, as
//
//	[helper] init  [--idle D] [--poll D]
//	[helper] serve --session ID [--git-root DIR --git-layout JSON] [--env-stdin] [--channel SOCKET] [--pass SOCKET]
//	[helper] reap  [--session ID] [--oom-score-adj N]
//	[helper] kill  --session ID | --marker M
//	[helper] git   export|import|keep ...
//	[helper] forward [--socket PATH]
//
// It returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "helper" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "shiro helper: want init, serve, reap, kill or git")
		return 2
	}
	// Every helper process is shiro's, not the command's: out of reach of
	// the command user's ptrace and /proc/<pid>/fd from the start (see
	// notDumpable).
	notDumpable()
	err := run(args[0], args[1:], stdin, stdout, stderr)
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "shiro helper %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "shiro helper %s: %v\n", args[0], err)
		return 1
	}
}

type usageError struct{ error }

func run(verb string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	parse := func() error {
		if err := fs.Parse(args); err != nil {
			return usageError{err}
		}
		if fs.NArg() > 0 {
			return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
		}
		return nil
	}
	switch verb {
	case "init":
		idle := fs.Duration("idle", 30*time.Minute, "stop after this long with no session open")
		poll := fs.Duration("poll", 0, "how often to count the open sessions (default: 1s, or a quarter of --idle when shorter)")
		if err := parse(); err != nil {
			return err
		}
		return Init(context.Background(), InitOptions{IdleTimeout: *idle, PollInterval: *poll, Log: stderr})
	case "serve":
		session := fs.String("session", "", "session id (prefix of every command's marker)")
		gitRoot := fs.String("git-root", "", "the shadow git directory whose state to report after each command")
		gitLayout := fs.String("git-layout", "", "the shadow's layout (JSON)")
		envStdin := fs.Bool("env-stdin", false, "read NAME=value entries for the base environment from the first line of stdin (a JSON array), before the protocol")
		channel := fs.String("channel", "", "serve on this Unix socket, after sending it the token read from stdin")
		pass := fs.String("pass", "", "hand the sockets of published ports' connections to the host over this Unix socket")
		if err := parse(); err != nil {
			return err
		}
		if *session == "" {
			return usageError{errors.New("--session is required")}
		}
		touchLastUsed()
		NotifyInit()
		opts := ServeOptions{SessionID: *session, Env: os.Environ(), OwnProcess: true, PassSocket: *pass}
		if *envStdin {
			extra, err := ReadEnvLine(stdin)
			if err != nil {
				return err
			}
			opts.Env = append(opts.Env, extra...)
		}
		if *gitRoot != "" {
			var l gitshadow.Layout
			if err := json.Unmarshal([]byte(*gitLayout), &l); err != nil {
				return usageError{fmt.Errorf("--git-layout: %w", err)}
			}
			fp := gitshadow.NewFingerprinter(*gitRoot, l)
			defer fp.Close()
			opts.State = fp.Fingerprint
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		in, closeIn := pollable(stdin)
		defer closeIn()
		return serveChannel(ctx, in, stdout, stderr, *channel, opts)
	case "reap":
		var opts ReapOptions
		fs.StringVar(&opts.SessionID, "session", "", "session id (for a kill from outside)")
		fs.IntVar(&opts.OOMScoreAdj, "oom-score-adj", 0, "raise the oom_score_adj of each command the reaper starts")
		if err := parse(); err != nil {
			return err
		}
		return Reap(os.NewFile(ReapFD, "reaper"), opts)
	case "kill":
		session := fs.String("session", "", "kill every process of this session (and its helper serve)")
		marker := fs.String("marker", "", "kill every process carrying this command marker")
		if err := parse(); err != nil {
			return err
		}
		switch {
		case *session != "":
			return KillSession(*session)
		case *marker != "":
			return KillMarker(*marker, false)
		}
		return usageError{errors.New("want --session or --marker")}
	case "git":
		return gitshadow.HelperMain(args, stdin, stdout)
	case "forward":
		socket := fs.String("socket", "", "carry connections to this Unix socket instead of over stdin/stdout")
		if err := parse(); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		in, closeIn := pollable(stdin)
		defer closeIn()
		return Forward(ctx, in, stdout, *socket)
	}
	return usageError{fmt.Errorf("unknown command %q (want init, serve, reap, kill or git)", verb)}
}

// ReadEnvLine reads the line `serve --env-stdin` starts with: a JSON array
// of NAME=value entries. It reads byte by byte, so nothing after the line
// is consumed. Engines whose exec API has no environment of its own
// (Kubernetes) pass the session's environment this way: it appears in
// no API request, audit log or process list.
func ReadEnvLine(r io.Reader) ([]string, error) {
	var line []byte
	var b [1]byte
	for {
		n, err := r.Read(b[:])
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			if len(line) >= 1<<20 {
				return nil, errors.New("read the environment line: longer than 1 MiB")
			}
			line = append(line, b[0])
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the environment line: %w", err)
		}
	}
	var env []string
	if err := json.Unmarshal(line, &env); err != nil {
		return nil, fmt.Errorf("read the environment line: %w", err)
	}
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("read the environment line: %q is not NAME=value", kv)
		}
	}
	return env, nil
}

// touchLastUsed records when a session last opened, for `sandbox ls`, in
// the state directory beside the (read-only) helper's: the helper lives at
// /.shiro/bin/<name>, its state at /.shiro/state.
func touchLastUsed() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	p := filepath.Join(filepath.Dir(filepath.Dir(exe)), "state", "last-used")
	now := time.Now()
	if err := os.Chtimes(p, now, now); err != nil {
		if f, err := os.Create(p); err == nil {
			f.Close()
		}
	}
}
