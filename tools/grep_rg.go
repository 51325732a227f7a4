package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/shiroagent/shiro/sandbox"
)

// rgArgBytes bounds the paths passed to one rg run (Linux allows 2 MiB of
// argv and environment; macOS 1 MiB).
const rgArgBytes = 256 << 10

// rgArgs is the argv of an rg run over files: the spec's flags
// (--line-number --no-heading --color never --max-count 200,
// --ignore-case) and, so that rg's output matches the Go search byte for
// byte: no config file, the path on every line (even for one file named),
// a NUL after it (paths may hold colons), raw bytes (no UTF-16 BOM
// sniffing: such files are binary by the shared rule). Files named after
// "--" skip every ignore rule, and a binary one that matches is reported
// as such; text searches binary files as text.
func rgArgs(p *grepParams, text bool, files []string) []string {
	args := []string{"rg", "--no-config", "--line-number", "--no-heading", "--color", "never",
		"--max-count", strconv.Itoa(GrepHitLimit), "--with-filename", "--null", "--encoding", "none"}
	if p.IgnoreCase {
		args = append(args, "--ignore-case")
	}
	if text {
		args = append(args, "--text")
	}
	args = append(args, "--regexp", p.Pattern, "--")
	return append(args, files...)
}

// searchRg searches files (sorted) with rg in the sandbox, in batches
// that fit an argv, rgRunsAtOnce at a time (measured: one rg given many
// file names gains little from its own threads), their hits taken in path
// order: once more than GrepHitLimit lines matched, the files left sort
// after every hit kept and are not searched. The binary files that matched
// are then judged by the shared rule: those it calls text (their first NUL
// is past the sniffed bytes) are searched again, as text.
func searchRg(ctx context.Context, env *Env, p *grepParams, files []string) (*hitSet, error) {
	if len(files) == 0 {
		files = []string{os.DevNull} // still let rg judge the pattern
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx) // stops the runs not needed
	defer cancel()
	batches := slices.Collect(rgBatches(files))
	runs := make([]*rgRun, len(batches))
	hits := newHitSet(GrepHitLimit)
	var binary []*rgFile
	for i, started := 0, 0; i < len(batches) && !hits.full(); i++ {
		for ; started < min(i+rgRunsAtOnce, len(batches)); started++ {
			runs[started] = startRg(ctx, &wg, env, p, batches[started])
		}
		<-runs[i].done
		if err := runs[i].err; err != nil {
			return nil, err
		}
		hits.merge(runs[i].hits)
		binary = append(binary, runs[i].binary...)
	}
	var text []string
	for _, f := range binary {
		if f.nulAt >= 0 && f.nulAt < BinarySniff {
			continue // rg's offset is that of the first NUL
		}
		if head, err := readHead(env.Root, f.path); err == nil && !IsBinary(head) {
			text = append(text, f.path)
		}
	}
	slices.Sort(text)
	for batch := range rgBatches(text) {
		if err := rgSearch(ctx, env, p, true, batch, hits, nil); err != nil {
			return nil, err
		}
	}
	return hits, nil
}

// rgRunsAtOnce is how many rg runs search batches at the same time, more
// than most sandboxes have CPUs: much of a run waits on stat and open.
const rgRunsAtOnce = 4

// rgRun is one batch searched in the background: what it found is kept
// apart until the batches before it are taken.
type rgRun struct {
	hits   *hitSet
	binary []*rgFile
	err    error
	done   chan struct{} // closed when the run ended
}

// startRg starts a run over batch; wg counts it until it ends.
func startRg(ctx context.Context, wg *sync.WaitGroup, env *Env, p *grepParams, batch []string) *rgRun {
	r := &rgRun{hits: newHitSet(GrepHitLimit), done: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(r.done)
		r.err = rgSearch(ctx, env, p, false, batch, r.hits, &r.binary)
	}()
	return r
}

// rgBatches cuts files into runs whose names fit in rgArgBytes.
func rgBatches(files []string) func(yield func([]string) bool) {
	return func(yield func([]string) bool) {
		for len(files) > 0 {
			n, size := 0, 0
			for n < len(files) && (n == 0 || size+len(files[n])+1 <= rgArgBytes) {
				size += len(files[n]) + 1
				n++
			}
			if !yield(files[:n]) {
				return
			}
			files = files[n:]
		}
	}
}

// rgSearch runs rg over one sorted batch of files and adds what it finds
// to hits, the binary files that matched to binary. Output about a file
// not in the batch is dropped.
func rgSearch(ctx context.Context, env *Env, p *grepParams, text bool, batch []string, hits *hitSet, binary *[]*rgFile) error {
	out := &rgParser{keep: hits.wouldKeep, file: func(f *rgFile) {
		if _, asked := slices.BinarySearch(batch, f.path); !asked {
			return
		}
		if !f.binary {
			hits.add(&f.fileHits)
		} else if binary != nil {
			*binary = append(*binary, f)
		}
	}}
	var stderr limitedBuffer
	run, err := env.Sandbox.Run(ctx, sandbox.Command{
		Args: rgArgs(p, text, batch), Dir: env.Workspace, Timeout: GrepTimeout,
		Stdout: out, Stderr: &stderr,
	})
	out.close()
	return rgError(ctx, run, err, stderr.String())
}

// rgError reads how an rg run ended: nil when it searched, which includes
// exit status 2 when rg's stderr only names files it could not read (they
// are skipped, as the Go search skips them).
func rgError(ctx context.Context, run sandbox.Result, err error, stderr string) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case rgNotFound(run, err):
		return errRgMissing
	case err != nil:
		return fmt.Errorf("run rg: %w", err)
	case run.TimedOut:
		return errGrepTimedOut
	case run.ExitCode <= 1: // 1: no match
		return nil
	case isRegexError(stderr):
		return grepFailure("Invalid regex: " + strings.TrimSpace(stderr))
	case rgSkippedUnreadable(stderr):
		return nil
	}
	return errRgFailed
}

// rgNotFound reports a sandbox without rg: the binary cannot start, or a
// shell in between reported 127.
func rgNotFound(run sandbox.Result, err error) bool {
	if err != nil {
		return errors.Is(err, exec.ErrNotFound) || strings.Contains(err.Error(), "executable file not found")
	}
	return run.ExitCode == 127
}

// rgSkippedUnreadable reports whether rg's stderr holds only errors about
// files it could not read ("... (os error 13)"). Anything else (an unknown
// flag in an old rg) means it did not search.
func rgSkippedUnreadable(stderr string) bool {
	for line := range strings.SplitSeq(strings.TrimSpace(stderr), "\n") {
		if !strings.Contains(line, "(os error ") {
			return false
		}
	}
	return true
}

// isRegexError reports whether rg's stderr is about the pattern.
func isRegexError(stderr string) bool {
	for _, s := range []string{"regex parse error", "error parsing regex", "not allowed in a regex", "regex exceeds size limit"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// rgFile is one file in rg's output: rg writes each file's lines together.
type rgFile struct {
	fileHits
	binary bool // rg reported a binary file that matches
	nulAt  int  // where rg saw its first NUL; -1 when the notice did not say
}

// rgMaxLine bounds the bytes kept of one output line: a path (at most
// 4 KiB) and enough text for GrepLineChars characters.
const rgMaxLine = 4096 + 4*GrepLineChars + 64

// rgParser reads rg's --null --no-heading output: "path\0line:text" per
// hit, and "path\0: binary file matches (found ...)" for a binary file.
// file is called with each file's lines; keep says whether a file's hit
// texts are worth keeping.
type rgParser struct {
	file func(*rgFile)
	keep func(path string) bool

	cur  *rgFile
	line []byte
	long bool // the current line is past rgMaxLine: dropping to its end
}

func (r *rgParser) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		chunk, rest, ended := bytes.Cut(p, []byte("\n"))
		if !r.long {
			room := rgMaxLine - len(r.line)
			r.long = len(chunk) > room
			r.line = append(r.line, chunk[:min(len(chunk), room)]...)
		}
		if !ended {
			break
		}
		r.parseLine(r.line)
		r.line, r.long, p = r.line[:0], false, rest
	}
	return n, nil
}

// close handles a last line without a newline and the last file.
func (r *rgParser) close() {
	if len(r.line) > 0 {
		r.parseLine(r.line)
		r.line = r.line[:0]
	}
	r.flush()
}

func (r *rgParser) parseLine(l []byte) {
	name, rest, ok := bytes.Cut(l, []byte{0})
	if !ok {
		// A notice without the NUL: "path: binary file matches (...".
		i := bytes.Index(l, []byte(rgBinaryNotice))
		if i < 0 {
			return
		}
		name, rest = l[:i], l[i:]
	}
	f := r.start(bytes.TrimPrefix(name, []byte("./")))
	if lineNo, text, ok := bytes.Cut(rest, []byte(":")); ok {
		if n, ok := parseLineNumber(lineNo); ok {
			f.count++
			if f.keep {
				f.lines = append(f.lines, lineHit{line: n, text: string(text)})
			}
			return
		}
	}
	if bytes.HasPrefix(rest, []byte(rgBinaryNotice)) {
		f.binary, f.nulAt = true, -1
		if _, after, ok := bytes.Cut(rest, []byte("byte around offset ")); ok {
			if end := bytes.IndexByte(after, ')'); end > 0 {
				if n, ok := parseLineNumber(after[:end]); ok {
					f.nulAt = n
				}
			}
		}
	}
}

// rgBinaryNotice starts rg's line about a binary file that matches.
const rgBinaryNotice = ": binary file matches ("

func parseLineNumber(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// start returns the entry of the file name, passing on the previous one.
func (r *rgParser) start(name []byte) *rgFile {
	if r.cur != nil && r.cur.path == string(name) {
		return r.cur
	}
	r.flush()
	p := string(name)
	r.cur = &rgFile{fileHits: fileHits{path: p, keep: r.keep(p)}}
	return r.cur
}

func (r *rgParser) flush() {
	if r.cur != nil {
		r.file(r.cur)
		r.cur = nil
	}
}

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 64<<10 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
