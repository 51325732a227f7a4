package copymode

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools"
)

// Remote runs copy mode's commands in a sandbox, on the copy of the
// workspace there. It is safe for concurrent use.
type Remote struct {
	// Sandbox runs the commands.
	Sandbox sandbox.Sandbox
	// Helper returns the helper's path in the sandbox, opening it first
	// if it must.
	Helper func(ctx context.Context) (string, error)
	// Workspace is the copy's path in the sandbox: the workspace's own.
	Workspace string
	// Cache is where, in the sandbox, a manifest remembers the hashes of
	// files that did not change ("": nowhere; AutoCache: the helper's
	// state directory, else the sandbox user's cache directory).
	Cache string
}

// AutoCache lets the helper choose where a manifest's cache lives.
const AutoCache = "auto"

// CommandError is a copy-mode command that ran and failed.
type CommandError struct {
	Verb   string
	Code   int
	Stderr string
}

func (e *CommandError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = fmt.Sprintf("exit %d", e.Code)
	}
	return fmt.Sprintf("%s in the sandbox: %s", e.Verb, msg)
}

// maxStderr bounds what a command's error keeps of its stderr.
const maxStderr = 8 << 10

// call runs `helper ws verb --ws <copy> args...` with stdin and stdout.
func (r *Remote) call(ctx context.Context, verb string, args []string, stdin io.Reader, stdout io.Writer) error {
	helper, err := r.Helper(ctx)
	if err != nil {
		return err
	}
	if helper == "" {
		return errors.New("this sandbox has no helper to run copy mode's commands")
	}
	argv := append([]string{helper, "helper", Verb, verb, "--ws", r.Workspace}, args...)
	stderr := &limitedBuffer{max: maxStderr}
	res, err := r.Sandbox.Run(ctx, sandbox.Command{Args: argv, Dir: r.Workspace, Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return fmt.Errorf("%s in the sandbox: %w", verb, err)
	}
	if res.ExitCode != 0 {
		return &CommandError{Verb: verb, Code: res.ExitCode, Stderr: stderr.String()}
	}
	return nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Tool runs the built-in tool name on the copy with input; check only
// asks whether the call would fail (the problem, "" when it would not).
func (r *Remote) Tool(ctx context.Context, name string, input []byte, check bool) (tools.Result, string, error) {
	var args []string
	if check {
		args = append(args, "--check")
	}
	var out bytes.Buffer
	err := r.call(ctx, "tool", append(args, name), bytes.NewReader(input), &out)
	if err != nil {
		return tools.Result{}, "", err
	}
	var rep toolReply
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return tools.Result{}, "", fmt.Errorf("%s in the sandbox: a reply that is not JSON: %w", name, err)
	}
	return tools.Result{Text: rep.Text, IsError: rep.IsError}, rep.Problem, nil
}

// Manifest lists the copy's files with their hashes: every file the
// walker lists, or only paths (those that exist) when paths is not nil.
func (r *Remote) Manifest(ctx context.Context, paths []string) ([]Entry, error) {
	var args []string
	var stdin io.Reader
	if paths != nil {
		args, stdin = []string{"--paths"}, bytes.NewReader(nulJoin(paths))
	} else if r.Cache != "" {
		args = []string{"--cache", r.Cache}
	}
	m, err := r.manifest(ctx, args, stdin)
	return m.Entries, err
}

// ManifestSince lists what changed in the copy since the manifest of
// generation since (a delta), or, when the sandbox's cache no longer
// holds it (or since is ""), every file (Full).
func (r *Remote) ManifestSince(ctx context.Context, since string) (Manifest, error) {
	args := []string{"--cache", r.Cache}
	if r.Cache == "" {
		args = nil
	} else if since != "" {
		args = append(args, "--since", since)
	}
	return r.manifest(ctx, args, nil)
}

func (r *Remote) manifest(ctx context.Context, args []string, stdin io.Reader) (Manifest, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := r.call(ctx, "manifest", args, stdin, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	m, perr := ParseManifest(pr)
	if perr != nil {
		cancel()
	}
	pr.CloseWithError(errors.New("manifest read"))
	if err := <-done; err != nil && perr == nil {
		return Manifest{}, err
	}
	return m, perr
}

// Pack fetches paths from the copy: fn sees each that exists, as a tar
// header (a regular file with its permission bits, or a symlink) and its
// content. A path that is not there is not seen.
func (r *Remote) Pack(ctx context.Context, paths []string, fn func(h *tar.Header, content io.Reader) error) error {
	if len(paths) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := r.call(ctx, "pack", nil, bytes.NewReader(nulJoin(paths)), pw)
		pw.CloseWithError(err)
		done <- err
	}()
	rerr := readTar(pr, fn)
	if rerr != nil {
		cancel()
	}
	pr.CloseWithError(errors.New("pack read"))
	if err := <-done; err != nil && rerr == nil {
		return err
	}
	return rerr
}

func readTar(r io.Reader, fn func(h *tar.Header, content io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the files from the sandbox: %w", err)
		}
		if err := checkName(h.Name); err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// Unpack writes into the copy what write puts in the tar it is given.
func (r *Remote) Unpack(ctx context.Context, write func(tw *tar.Writer) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		tw := tar.NewWriter(pw)
		err := write(tw)
		if err == nil {
			err = tw.Close()
		}
		if err != nil {
			cancel() // the command must not take a cut tar for a whole one
		}
		pw.CloseWithError(err)
		done <- err
	}()
	err := r.call(ctx, "unpack", nil, pr, io.Discard)
	pr.CloseWithError(errors.New("unpack ended"))
	if werr := <-done; werr != nil {
		return werr
	}
	return err
}

// Remove removes paths from the copy.
func (r *Remote) Remove(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	return r.call(ctx, "remove", nil, bytes.NewReader(nulJoin(paths)), io.Discard)
}

// Read reads the copy's file at the model's path p for an approval
// preview.
func (r *Remote) Read(ctx context.Context, p string) (Preview, error) {
	var out bytes.Buffer
	if err := r.call(ctx, "read", []string{p}, nil, &out); err != nil {
		return Preview{}, err
	}
	var pv Preview
	if err := json.Unmarshal(out.Bytes(), &pv); err != nil {
		return Preview{}, fmt.Errorf("read %s in the sandbox: %w", p, err)
	}
	return pv, nil
}

func nulJoin(paths []string) []byte {
	var b []byte
	for _, p := range paths {
		b = append(append(b, p...), 0)
	}
	return b
}

// Wrap returns t (a tool InSandbox names) running on the copy through r.
// A tool that can check a call keeps that ability.
func Wrap(t tools.Tool, r *Remote) tools.Tool {
	rt := remoteTool{Tool: t, r: r}
	if _, ok := t.(tools.Checker); ok {
		return checkingTool{rt}
	}
	return rt
}

type remoteTool struct {
	tools.Tool
	r *Remote
}

// Guidance passes the wrapped tool's guidance on.
func (t remoteTool) Guidance() string {
	if g, ok := t.Tool.(tools.Guided); ok {
		return g.Guidance()
	}
	return ""
}

func (t remoteTool) Run(ctx context.Context, _ *tools.Env, input json.RawMessage) (tools.Result, error) {
	res, _, err := t.r.Tool(ctx, t.Name(), input, false)
	if err := ctx.Err(); err != nil {
		return tools.Result{}, err
	}
	var ce *CommandError
	if errors.As(err, &ce) {
		return tools.Errorf("%s could not run in the sandbox: %s", t.Name(), strings.TrimSpace(ce.Stderr)), nil
	}
	return res, err
}

type checkingTool struct{ remoteTool }

func (t checkingTool) Check(ctx context.Context, _ *tools.Env, input json.RawMessage) string {
	_, problem, err := t.r.Tool(ctx, t.Name(), input, true)
	if err != nil {
		return "" // the call itself will say what is wrong
	}
	return problem
}
