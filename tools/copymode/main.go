package copymode

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox/helper"
	"github.com/shiroagent/shiro/sandbox/local"
	"github.com/shiroagent/shiro/tools"
)

// Verb is the helper subcommand that leads to Main: `<helper> helper ws
// VERB ...`.
const Verb = "ws"

// Main runs one copy-mode command in the sandbox, on the copy of the
// workspace at --ws:
//
//	tool NAME [--check]   a built-in tool; its input on stdin, its result (JSON) on stdout
//	manifest [--paths]    the walker's files: "MODE HASH SIZE PATH\x00" records
//	                      (only the NUL-separated paths on stdin with --paths;
//	                      only what changed with --since GEN and a --cache)
//	pack                  a tar of the NUL-separated paths on stdin
//	unpack                the tar on stdin, written into the copy
//	remove                the NUL-separated paths on stdin removed
//	read PATH             a file for a preview (JSON)
//
// It returns the exit code: 0, 1 when the command failed, 2 for bad usage.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "shiro helper ws: want tool, manifest, pack, unpack, remove or read")
		return 2
	}
	verb, args := args[0], args[1:]
	fl := flag.NewFlagSet(verb, flag.ContinueOnError)
	fl.SetOutput(stderr)
	ws := fl.String("ws", "", "the workspace copy")
	check := fl.Bool("check", false, "tool: only check the call")
	paths := fl.Bool("paths", false, "manifest: only the paths on stdin")
	cache := fl.String("cache", "", "manifest: a file that remembers the hashes of unchanged files")
	since := fl.String("since", "", "manifest: the generation of the last manifest read (a delta from it)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *ws == "" {
		fmt.Fprintf(stderr, "shiro helper ws %s: --ws is required\n", verb)
		return 2
	}
	// The copy is opened once, as the host opens its workspace: its root
	// and the write gate on the same descriptor.
	w, err := workspace.Open(*ws)
	if err != nil {
		fmt.Fprintf(stderr, "shiro helper ws %s: %v\n", verb, err)
		return 1
	}
	defer w.Close()
	root := w.Root()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	out := bufio.NewWriterSize(stdout, 64<<10)
	switch verb {
	case "tool":
		if fl.NArg() != 1 {
			fmt.Fprintln(stderr, "shiro helper ws tool: want one tool name")
			return 2
		}
		err = runTool(ctx, w, fl.Arg(0), *check, stdin, out)
	case "manifest":
		var only []string
		if *paths {
			if only, err = readPaths(stdin); err != nil {
				break
			}
		}
		c := *cache
		if c == AutoCache {
			c = autoCache()
		}
		err = writeManifest(ctx, root, only, *paths, c, *since, out)
	case "pack":
		var names []string
		if names, err = readPaths(stdin); err == nil {
			err = pack(root, names, out)
		}
	case "unpack":
		err = unpack(root, stdin)
	case "remove":
		var names []string
		if names, err = readPaths(stdin); err == nil {
			err = remove(root, names)
		}
	case "read":
		if fl.NArg() != 1 {
			fmt.Fprintln(stderr, "shiro helper ws read: want one path")
			return 2
		}
		err = json.NewEncoder(out).Encode(readPreview(root, *ws, fl.Arg(0)))
	default:
		fmt.Fprintf(stderr, "shiro helper ws: unknown command %q\n", verb)
		return 2
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "shiro helper ws %s: %v\n", verb, err)
		return 1
	}
	return 0
}

// autoCache is where a manifest's cache lives when the host lets the
// helper choose: the state directory beside the helper's own (…/bin/x →
// …/state), where the sandbox has one it may write, else the user's
// cache directory; "" when neither is there.
func autoCache() string {
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Join(filepath.Dir(filepath.Dir(exe)), "state")
		if unix.Access(dir, unix.W_OK) == nil {
			return filepath.Join(dir, "ws-manifest")
		}
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "shiro", "ws-manifest")
	}
	return ""
}

// toolReply is a tool call's outcome as the sandbox reports it.
type toolReply struct {
	Text    string `json:"text,omitempty"`
	IsError bool   `json:"isError,omitempty"`
	// Problem is a check's finding (--check): empty when the call would
	// go through.
	Problem string `json:"problem,omitempty"`
}

// runTool runs the built-in tool name on the copy: the same code, jail
// and texts as on the host. Commands it starts (grep's rg) run here, under
// a reaper of their own.
func runTool(ctx context.Context, w *workspace.Workspace, name string, check bool, stdin io.Reader, out io.Writer) error {
	ws, root := w.Path(), w.Root()
	t := tools.Find(tools.Builtins(), name)
	if t == nil || !InSandbox(name) {
		return fmt.Errorf("no file tool %q", name)
	}
	input, err := io.ReadAll(io.LimitReader(stdin, maxInput))
	if err != nil {
		return fmt.Errorf("read the input: %w", err)
	}
	sb, err := local.New(ws)
	if err != nil {
		return err
	}
	defer sb.Close()
	// The same write gate as on the host: the copy's .git and symlinks
	// are refused with the same texts.
	env := &tools.Env{Workspace: ws, Root: root, Gate: w.Gate(), Sandbox: sb}
	var reply toolReply
	if check {
		if c, ok := t.(tools.Checker); ok {
			reply.Problem = c.Check(ctx, env, input)
		}
	} else {
		res, err := t.Run(ctx, env, input)
		if err != nil {
			return err
		}
		reply = toolReply{Text: res.Text, IsError: res.IsError}
	}
	return json.NewEncoder(out).Encode(reply)
}

// maxInput bounds a tool call's input (a write_file of a large file).
const maxInput = 64 << 20

// inSandbox are the built-in tools that read or write the workspace's
// files: in copy mode they run on the copy. bash and the git tools run
// commands in the sandbox already.
var inSandbox = map[string]bool{
	"read_file": true, "read_many_files": true, "write_file": true, "edit_file": true,
	"multi_edit": true, "list_dir": true, "glob": true, "grep": true,
}

// InSandbox reports whether copy mode runs the built-in tool name in the
// sandbox.
func InSandbox(name string) bool { return inSandbox[name] }

// readPaths reads NUL-separated paths.
func readPaths(r io.Reader) ([]string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read the paths: %w", err)
	}
	var out []string
	for p := range bytes.SplitSeq(data, []byte{0}) {
		if len(p) > 0 {
			out = append(out, string(p))
		}
	}
	return out, nil
}

// checkName refuses a path that is not a clean relative path inside the
// copy (os.Root refuses the rest).
func checkName(name string) error {
	if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("bad path %q", name)
	}
	return nil
}

// pack writes a tar of names: regular files with their permission bits,
// symlinks with their targets. A name that is missing, or anything else,
// is left out: the host takes a name it asked for and did not get for
// gone.
func pack(root *os.Root, names []string, w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, name := range names {
		if err := checkName(name); err != nil {
			return err
		}
		fi, err := root.Lstat(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				continue
			}
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(name)
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := PackRegular(tw, root, name); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// PackRegular adds the regular file name, read through root, to tw (see
// TarFile); a name that is missing, or not a regular file, is left out.
func PackRegular(tw *tar.Writer, root *os.Root, name string) error {
	f, err := confine.OpenRegular(root, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, confine.ErrNotRegular) {
			return nil
		}
		return err
	}
	defer f.Close()
	return TarFile(tw, name, f)
}

// TarFile adds the open regular file f to tw as name, with its permission
// bits. Its size is the descriptor's when it is added, so a file that
// grows meanwhile cannot break the tar, and one that shrinks is padded.
func TarFile(tw *tar.Writer, name string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: int64(fi.Mode().Perm()), Size: fi.Size()}); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, fi.Size()))
	if err == nil && n < fi.Size() {
		_, err = tw.Write(make([]byte, fi.Size()-n))
	}
	return err
}

// unpack writes the tar's regular files (atomically: a temporary file
// renamed over the old one), symlinks and directories into the copy. Each
// directory is opened once (through root, so never outside the copy) and
// its entries are written by name inside it: resolving every path from
// the top would cost a system call per level per file.
func unpack(root *os.Root, r io.Reader) error {
	dirs := newDirCache(root)
	defer dirs.close()
	// The file system creates files in several directories at once:
	// small files are written by a few goroutines, joined before return.
	// A tar names each path once, and never a file where it names a
	// directory, so the writes cannot trip over each other.
	jobs := make(chan unpackJob, 64)
	errc := make(chan error, unpackWorkers)
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	for range unpackWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := j.write(dirs); err != nil {
					errc <- err
					stopOnce.Do(func() { close(stop) })
					for range jobs { // drain: the reader stops at the next send
					}
					return
				}
			}
		}()
	}
	err := readUnpack(tar.NewReader(r), dirs, jobs, stop)
	close(jobs)
	wg.Wait()
	select {
	case werr := <-errc:
		return werr
	default:
	}
	return err
}

// unpackWorkers write the small files of an unpack.
const unpackWorkers = 4

// unpackInline is the size from which a file is written by the reader
// itself rather than held in memory for a worker.
const unpackInline = 1 << 20

// unpackJob is one entry for a worker.
type unpackJob struct {
	name, link string
	perm       fs.FileMode
	data       []byte
	symlink    bool
}

func (j unpackJob) write(dirs *dirCache) error {
	if j.symlink {
		return writeSymlink(dirs, j.name, j.link)
	}
	return writeFile(dirs, j.name, j.perm, bytes.NewReader(j.data))
}

// readUnpack reads the tar, writing large files and directories itself
// and handing the rest to the workers, until the tar ends or stop closes.
func readUnpack(tr *tar.Reader, dirs *dirCache, jobs chan<- unpackJob, stop <-chan struct{}) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the tar: %w", err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if err := checkName(name); err != nil {
			return err
		}
		var job unpackJob
		switch h.Typeflag {
		case tar.TypeDir:
			if _, err := dirs.get(name); err != nil {
				return err
			}
			continue
		case tar.TypeReg:
			perm := fs.FileMode(h.Mode).Perm()
			if h.Size >= unpackInline {
				if err := writeFile(dirs, name, perm, tr); err != nil {
					return err
				}
				continue
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("read the tar: %w", err)
			}
			job = unpackJob{name: name, perm: perm, data: data}
		case tar.TypeSymlink:
			job = unpackJob{name: name, link: h.Linkname, symlink: true}
		default:
			return fmt.Errorf("%s: unsupported entry type %q", name, h.Typeflag)
		}
		select {
		case jobs <- job:
		case <-stop:
			return nil // a worker failed: its error is returned
		}
	}
}

// dirCache holds the copy's directories opened so far. It is safe for
// concurrent use.
type dirCache struct {
	root *os.Root
	mu   sync.Mutex
	open map[string]*os.Root
}

func newDirCache(root *os.Root) *dirCache {
	return &dirCache{root: root, open: map[string]*os.Root{".": root}}
}

func (c *dirCache) close() {
	for d, r := range c.open {
		if d != "." {
			r.Close()
		}
	}
}

// get opens dir, making it (and what it needs above it) when it is
// missing; a file or symlink where a directory must be is replaced.
func (c *dirCache) get(dir string) (*os.Root, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(dir)
}

func (c *dirCache) getLocked(dir string) (*os.Root, error) {
	if r, ok := c.open[dir]; ok {
		return r, nil
	}
	parent, err := c.getLocked(path.Dir(dir))
	if err != nil {
		return nil, err
	}
	base := path.Base(dir)
	r, err := parent.OpenRoot(base)
	if err != nil {
		if fi, lerr := parent.Lstat(base); lerr == nil && !fi.IsDir() {
			if err := parent.Remove(base); err != nil {
				return nil, err
			}
		}
		if err := parent.Mkdir(base, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if r, err = parent.OpenRoot(base); err != nil {
			return nil, err
		}
	}
	c.open[dir] = r
	return r, nil
}

// forget drops dir and what is below it (it was removed or replaced).
func (c *dirCache) forget(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for d, r := range c.open {
		if d == dir || strings.HasPrefix(d, dir+"/") {
			r.Close()
			delete(c.open, d)
		}
	}
}

func writeFile(dirs *dirCache, name string, perm fs.FileMode, r io.Reader) (err error) {
	dir, err := dirs.get(path.Dir(name))
	if err != nil {
		return err
	}
	base := path.Base(name)
	tmp := tempName(base)
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			dir.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil { // the umask applied at creation
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return replace(dirs, dir, tmp, name)
}

func writeSymlink(dirs *dirCache, name, target string) error {
	dir, err := dirs.get(path.Dir(name))
	if err != nil {
		return err
	}
	tmp := tempName(path.Base(name))
	_ = dir.Remove(tmp)
	if err := dir.Symlink(target, tmp); err != nil {
		return err
	}
	if err := replace(dirs, dir, tmp, name); err != nil {
		dir.Remove(tmp)
		return err
	}
	return nil
}

// replace renames tmp over name's entry in dir; a directory standing
// there goes first.
func replace(dirs *dirCache, dir *os.Root, tmp, name string) error {
	base := path.Base(name)
	err := dir.Rename(tmp, base)
	if err == nil {
		return nil
	}
	fi, lerr := dir.Lstat(base)
	if lerr != nil || !fi.IsDir() {
		return err
	}
	dirs.forget(name)
	if err := dir.RemoveAll(base); err != nil {
		return err
	}
	return dir.Rename(tmp, base)
}

func tempName(base string) string {
	if len(base) > 200 { // the name must stay a name (NAME_MAX is 255)
		base = base[:200]
	}
	return "." + base + ".shiro-copy-tmp"
}

// remove removes names (a file, a symlink, or a directory left empty),
// then the directories their removal left empty.
func remove(root *os.Root, names []string) error {
	for _, name := range names {
		if err := checkName(name); err != nil {
			return err
		}
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if root.Remove(dir) != nil {
				break
			}
		}
	}
	return nil
}

// Preview is a file read for an approval preview: its content, whether it
// exists, or why it cannot be shown.
type Preview struct {
	Content string `json:"content,omitempty"`
	Exists  bool   `json:"exists,omitempty"`
	Problem string `json:"problem,omitempty"`
}

func readPreview(root *os.Root, ws, p string) Preview {
	content, exists, problem := confine.ReadPreview(root, ws, p)
	return Preview{Content: content, Exists: exists, Problem: problem}
}

// HelperMain is the whole command line of the helper in the sandbox: the
// copy-mode commands (`[helper] ws ...`) and everything helper.Main runs.
// shiro-helper and shiro's hidden `helper` command both call it.
func HelperMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	rest := args
	if len(rest) > 0 && rest[0] == "helper" {
		rest = rest[1:]
	}
	if len(rest) > 0 && rest[0] == Verb {
		return Main(rest[1:], stdin, stdout, stderr)
	}
	return helper.Main(args, stdin, stdout, stderr)
}
