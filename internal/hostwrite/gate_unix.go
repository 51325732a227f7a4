//go:build unix

package hostwrite

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// fileID is a file's identity: its device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{dev: uint64(st.Dev), ino: st.Ino} } //nolint:unconvert // Dev is 32 bits on some systems

// Gate is the one way shiro writes into a workspace on the host. Make one
// per workspace (New or Open) and hand it to every writer; it is safe for
// concurrent use. Close it when the last writer is done.
type Gate struct {
	ws     string // the workspace's absolute path, for absolute paths and messages
	root   int    // the workspace directory, held open
	rootID fileID

	mu        sync.RWMutex
	protected map[fileID]string // identity -> what it is ("the repository's git directory")

	// afterWalk, when set (tests), runs after a walk has reached the
	// directory of the entry rel and before the entry is touched.
	afterWalk func(rel string)
}

// New makes the gate of the workspace at ws that root holds open. The gate
// keeps a descriptor of its own of the same directory (the one root holds,
// whatever has happened to the path since), and protects the workspace's
// git directories (see Protect).
func New(root *os.Root, ws string) (*Gate, error) {
	f, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("open the workspace for writing: %w", err)
	}
	defer f.Close()
	fd := -1
	var ctlErr error
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(raw uintptr) {
			fd, ctlErr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0)
		})
	}
	if err = errors.Join(err, ctlErr); err != nil {
		return nil, fmt.Errorf("open the workspace for writing: %w", err)
	}
	return newGate(fd, ws)
}

// Open makes the gate of the workspace directory at ws, opening it.
func Open(ws string) (*Gate, error) {
	fd, err := openDirAt(unix.AT_FDCWD, ws, false)
	if err != nil {
		return nil, fmt.Errorf("open the workspace for writing: %w", &os.PathError{Op: "open", Path: ws, Err: err})
	}
	return newGate(fd, ws)
}

func newGate(fd int, ws string) (*Gate, error) {
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open the workspace for writing: %w", err)
	}
	if abs, err := filepath.Abs(ws); err == nil {
		ws = abs
	}
	g := &Gate{ws: filepath.Clean(ws), root: fd, rootID: idOf(&st), protected: map[fileID]string{}}
	g.discover()
	return g, nil
}

// Close closes the gate's descriptor of the workspace.
func (g *Gate) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.root < 0 {
		return nil
	}
	err := unix.Close(g.root)
	g.root = -1
	return err
}

// Workspace is the workspace's absolute path.
func (g *Gate) Workspace() string { return g.ws }

// discover protects the workspace's own git directory: .git when it is a
// directory (or a symlink to one), else the directory a .git file names
// (gitdir:), and in both cases the common directory its commondir names.
// What cannot be read protects nothing; the name and shape rules still
// hold for it.
func (g *Gate) discover() {
	var st unix.Stat_t
	if fstatat(g.root, ".git", &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	dotgit := filepath.Join(g.ws, ".git")
	gitdir := dotgit
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		data, err := readSmall(g.root, ".git")
		if err != nil {
			return
		}
		target, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
		if !ok {
			return
		}
		gitdir = strings.TrimSpace(target)
		if !filepath.IsAbs(gitdir) {
			gitdir = filepath.Join(g.ws, gitdir)
		}
	}
	desc := repositoryDesc
	if data, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
		common := strings.TrimSpace(string(data))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitdir, common)
		}
		if g.protect(common, repositoryDesc) == nil {
			desc = worktreeDesc
		}
	}
	_ = g.protect(gitdir, desc)
}

// readSmall reads the regular file name in the directory dirfd, without
// following a symlink or blocking on a FIFO, up to 64 KiB.
func readSmall(dirfd int, name string) ([]byte, error) {
	fd, err := openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	buf := make([]byte, 64<<10)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return nil, err
	}
	return buf[:n], nil
}

// Protect adds the git directory (or gitfile) at p to what the gate never
// writes into, replaces or removes, known by its identity so that no
// spelling, rename or second path reaches it. p is absolute, or relative to
// the workspace; it is resolved as the file system resolves it now (the
// caller found it there). The Docker backend's boundary protects the
// user's nested repositories this way.
func (g *Gate) Protect(p string) error {
	if !filepath.IsAbs(p) {
		p = filepath.Join(g.ws, p)
	}
	return g.protect(p, protectedDesc)
}

func (g *Gate) protect(p, desc string) error {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return &os.PathError{Op: "protect", Path: p, Err: err}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.protected[idOf(&st)]; !ok {
		g.protected[idOf(&st)] = desc
	}
	return nil
}

// isProtected says what the identity id is, when the gate protects it.
func (g *Gate) isProtected(id fileID) (string, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	desc, ok := g.protected[id]
	return desc, ok
}

// clean turns p (workspace-relative, slash-separated, or absolute inside
// the workspace) into a clean relative path ("." for the workspace), or
// refuses it.
func (g *Gate) clean(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", &os.PathError{Op: "write", Path: p, Err: unix.EINVAL}
	}
	q := p
	if filepath.IsAbs(q) {
		rel, err := filepath.Rel(g.ws, filepath.Clean(q))
		if err != nil {
			return "", &Refusal{Path: p, Reason: outsideReason}
		}
		q = filepath.ToSlash(rel)
	}
	q = path.Clean(q)
	if q == ".." || strings.HasPrefix(q, "../") || path.IsAbs(q) {
		return "", &Refusal{Path: p, Reason: outsideReason}
	}
	return q, nil
}

// split is rel's directory and base name.
func split(rel string) (dir, base string) {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i], rel[i+1:]
	}
	return ".", rel
}

func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// walkMode says what a walk does where a directory is missing.
type walkMode int

const (
	walkExisting walkMode = iota // stop with the error (fs.ErrNotExist)
	walkCreate                   // make it (checked as a new entry of its parent)
	walkLoose                    // only symlinks and protected directories are refused (ReplaceWithSymlink)
)

// walk opens the directory dir (clean, relative) one component at a time
// from the workspace, never following a symlink, and checks each directory
// on the way, the workspace included: not a protected identity, not named
// as .git, not a git directory by its shape. p is the path the refusal is
// about. The descriptor returned is the caller's to close.
func (g *Gate) walk(dir, p string, mode walkMode) (int, error) {
	g.mu.RLock()
	root := g.root
	g.mu.RUnlock()
	if root < 0 {
		return -1, errors.New("the write gate is closed")
	}
	cur, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	if err := g.checkDir(cur, ".", p, mode); err != nil {
		unix.Close(cur)
		return -1, err
	}
	if dir == "." {
		return cur, nil
	}
	if mode == walkCreate {
		// Nothing is made on the way to a name that is refused anyway.
		at := "."
		for name := range strings.SplitSeq(dir, "/") {
			at = join(at, name)
			if IsDotGit(name) {
				if err := g.dotGitAt(at, p); err != nil {
					unix.Close(cur)
					return -1, err
				}
			}
		}
	}
	at := "."
	for name := range strings.SplitSeq(dir, "/") {
		here := join(at, name)
		if mode != walkLoose && IsDotGit(name) {
			// The identity check names the workspace's own .git better.
			if next, err := openDirAt(cur, name, true); err == nil {
				err = g.checkDir(next, here, p, mode)
				unix.Close(next)
				if err != nil {
					unix.Close(cur)
					return -1, err
				}
			}
			unix.Close(cur)
			return -1, dotGitRefusal(p, here)
		}
		next, err := openDirAt(cur, name, true)
		if errors.Is(err, unix.ENOENT) && mode == walkCreate {
			if err = g.checkNew(cur, at, name, p); err == nil {
				err = mkdirat(cur, name, 0o755)
				if err == nil || errors.Is(err, unix.EEXIST) {
					next, err = openDirAt(cur, name, true)
				}
			}
		}
		if err != nil {
			err = g.classify(cur, name, here, p, err)
			unix.Close(cur)
			return -1, err
		}
		unix.Close(cur)
		cur = next
		if err := g.checkDir(cur, here, p, mode); err != nil {
			unix.Close(cur)
			return -1, err
		}
		at = here
	}
	return cur, nil
}

// dotGitAt is the refusal of p for its directory here, named as .git: a
// walk there refuses it, and says best why when the directory is there
// (the workspace's own git directory, a symlink on the way).
func (g *Gate) dotGitAt(here, p string) error {
	fd, err := g.walk(here, p, walkExisting)
	if err == nil {
		unix.Close(fd) // cannot happen: the walk refuses the name
	}
	var r *Refusal
	if errors.As(err, &r) {
		return err
	}
	return dotGitRefusal(p, here)
}

// classify turns the failure to open the directory here (name in the
// directory dirfd) into a refusal (a symlink) or an error that says what
// is there.
func (g *Gate) classify(dirfd int, name, here, p string, err error) error {
	var refusal *Refusal
	if errors.As(err, &refusal) {
		return err
	}
	var st unix.Stat_t
	if serr := fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return symlinkRefusal(p, here)
		case unix.S_IFDIR:
		default:
			return &notDirError{path: here}
		}
	}
	return &os.PathError{Op: "open", Path: here, Err: err}
}

// notDirError is a file where the path needs a directory.
type notDirError struct{ path string }

func (e *notDirError) Error() string { return e.path + " is not a directory" }
func (e *notDirError) Unwrap() error { return unix.ENOTDIR }

// checkDir checks the open directory fd at here on the way to p.
func (g *Gate) checkDir(fd int, here, p string, mode walkMode) error {
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: here, Err: err}
	}
	if desc, ok := g.isProtected(idOf(&st)); ok {
		if here == "." {
			return refuse(p, "the workspace is %s; %s", desc, noGitMetadata)
		}
		return protectedRefusal(p, here, desc)
	}
	if mode == walkLoose {
		return nil
	}
	if shape := GitDirShape(func(n string) bool { return exists(fd, n) }); shape != "" {
		return shapeRefusal(p, here, shape)
	}
	return nil
}

// checkNew refuses to make the entry name in the directory dirfd (at dir):
// a name git takes for .git, or one that completes a git directory's
// shape there.
func (g *Gate) checkNew(dirfd int, dir, name, p string) error {
	if IsDotGit(name) {
		if join(dir, name) == p {
			return dotGitEntry(p)
		}
		return dotGitRefusal(p, join(dir, name))
	}
	if n, ok := shapeName(name); ok {
		has := func(x string) bool { return x == n || exists(dirfd, x) }
		if GitDirShape(has) != "" {
			return makesRefusal(p, dir)
		}
	}
	return nil
}

// checkEntry refuses to replace or remove the entry name in dirfd when it
// is protected.
func (g *Gate) checkEntry(dirfd int, dir, name, p string) error {
	var st unix.Stat_t
	if fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil
	}
	if desc, ok := g.isProtected(idOf(&st)); ok {
		return protectedEntry(p, desc)
	}
	return nil
}

func exists(dirfd int, name string) bool {
	var st unix.Stat_t
	return fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// Dir is a directory of the workspace that passed the gate, held open:
// its operations act on single names inside it, whatever happens to the
// path that led to it. Close it when done.
type Dir struct {
	g   *Gate
	fd  int
	rel string
}

// OpenDir opens the existing directory rel through the gate.
func (g *Gate) OpenDir(rel string) (*Dir, error) { return g.openDir(rel, walkExisting) }

// MkdirAll opens the directory rel through the gate, making what is
// missing of it (0755 less the umask).
func (g *Gate) MkdirAll(rel string) (*Dir, error) { return g.openDir(rel, walkCreate) }

func (g *Gate) openDir(p string, mode walkMode) (*Dir, error) {
	rel, err := g.clean(p)
	if err != nil {
		return nil, err
	}
	fd, err := g.walk(rel, rel, mode)
	if err != nil {
		return nil, err
	}
	return &Dir{g: g, fd: fd, rel: rel}, nil
}

// Path is the directory's workspace-relative path ("." for the workspace).
func (d *Dir) Path() string { return d.rel }

// Close closes the directory.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Sync makes the directory's entries durable.
func (d *Dir) Sync() error { return unix.Fsync(d.fd) }

// Lstat is the type and permission bits of the entry name (not followed).
func (d *Dir) Lstat(name string) (fs.FileMode, error) {
	var st unix.Stat_t
	if err := fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, &os.PathError{Op: "lstat", Path: join(d.rel, name), Err: err}
	}
	return modeOf(uint32(st.Mode)), nil
}

func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	return mode
}

// Create makes the new regular file name (O_EXCL: never an existing entry,
// never through a symlink) for writing, with perm less the umask.
func (d *Dir) Create(name string, perm fs.FileMode) (*os.File, error) {
	p := join(d.rel, name)
	if err := d.g.checkNew(d.fd, d.rel, name, p); err != nil {
		return nil, err
	}
	fd, err := openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// Symlink makes the new symlink name with target.
func (d *Dir) Symlink(target, name string) error {
	p := join(d.rel, name)
	if err := d.g.checkNew(d.fd, d.rel, name, p); err != nil {
		return err
	}
	if err := unix.Symlinkat(target, d.fd, name); err != nil {
		return &os.PathError{Op: "symlink", Path: p, Err: err}
	}
	return nil
}

// Replace renames the entry tmp over name, both in this directory: name
// is checked as a new entry (not .git, not completing a git directory) and
// must not be a protected one.
func (d *Dir) Replace(tmp, name string) error {
	p := join(d.rel, name)
	if err := d.g.checkNew(d.fd, d.rel, name, p); err != nil {
		return err
	}
	if err := d.g.checkEntry(d.fd, d.rel, name, p); err != nil {
		return err
	}
	if err := renameat(d.fd, tmp, d.fd, name); err != nil {
		return &os.PathError{Op: "rename", Path: p, Err: err}
	}
	return nil
}

// Remove removes the entry name: a file, a symlink (not what it points
// at) or an empty directory. A .git entry or a protected one is refused.
func (d *Dir) Remove(name string) error {
	return d.remove(name, false)
}

// RemoveEmptyDir removes the directory name when it is empty.
func (d *Dir) RemoveEmptyDir(name string) error {
	return d.remove(name, true)
}

func (d *Dir) remove(name string, onlyDir bool) error {
	p := join(d.rel, name)
	if name == "" || name == "." || name == ".." || strings.IndexByte(name, '/') >= 0 {
		return &os.PathError{Op: "remove", Path: p, Err: unix.EINVAL}
	}
	if IsDotGit(name) {
		return dotGitEntry(p)
	}
	if err := d.g.checkEntry(d.fd, d.rel, name, p); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "remove", Path: p, Err: err}
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	} else if onlyDir {
		return &os.PathError{Op: "remove", Path: p, Err: unix.ENOTDIR}
	}
	if err := unlinkat(d.fd, name, flags); err != nil {
		return &os.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

// WriteFile replaces the file rel with data, atomically: a temporary file
// beside it is written, synced and renamed over it, then the directory is
// synced. An existing file keeps its permission bits; a new one gets 0644
// less the umask. Missing parent directories are made. A symlink at rel is
// replaced, not followed (a caller that wants the link's target resolves
// it first, and the target passes the gate in turn).
func (g *Gate) WriteFile(p string, data []byte) (err error) {
	rel, err := g.clean(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("%s is a directory", p)
	}
	dir, base := split(rel)
	if IsDotGit(base) {
		return dotGitEntry(rel)
	}
	fd, err := g.walk(dir, rel, walkCreate)
	if err != nil {
		return err
	}
	d := &Dir{g: g, fd: fd, rel: dir}
	defer d.Close()
	if g.afterWalk != nil {
		g.afterWalk(rel)
	}
	perm, existing := fs.FileMode(0o644), false
	if mode, err := d.Lstat(base); err == nil {
		if mode.IsDir() {
			return fmt.Errorf("%s is a directory", rel)
		}
		if mode.IsRegular() {
			perm, existing = mode.Perm(), true
		}
	}
	if err := g.checkNew(d.fd, dir, base, rel); err != nil {
		return err
	}
	tmp := TempName(base, ".shiro-tmp")
	f, err := d.Create(tmp, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			_ = unlinkat(d.fd, tmp, 0)
		}
	}()
	if existing {
		if err := f.Chmod(perm); err != nil { // the umask applied at creation
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := d.Replace(tmp, base); err != nil {
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s is a directory", rel)
		}
		return err
	}
	_ = d.Sync() // make the rename durable
	return nil
}

// Remove removes the entry rel (see Dir.Remove); a missing one is an
// error matching fs.ErrNotExist.
func (g *Gate) Remove(p string) error {
	return g.removeAt(p, false)
}

// RemoveEmptyDir removes the directory rel when it is empty.
func (g *Gate) RemoveEmptyDir(p string) error {
	return g.removeAt(p, true)
}

func (g *Gate) removeAt(p string, onlyDir bool) error {
	rel, err := g.clean(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return &os.PathError{Op: "remove", Path: p, Err: unix.EINVAL}
	}
	dir, base := split(rel)
	fd, err := g.walk(dir, rel, walkExisting)
	if err != nil {
		return err
	}
	d := &Dir{g: g, fd: fd, rel: dir}
	defer d.Close()
	if g.afterWalk != nil {
		g.afterWalk(rel)
	}
	return d.remove(base, onlyDir)
}

// ReplaceWithSymlink replaces the existing entry rel (a .git gitfile or
// symlink, a git directory's HEAD) with a symlink to target, atomically: a
// new symlink beside it renamed over it. It is the git boundary's
// primitive for neutralising a repository the sandbox made, so unlike
// every other write it may touch an entry named .git or a directory that
// is a git directory by its shape; it still walks without following a
// symlink, and refuses when rel, its directory or any directory above is
// protected. A directory at rel is not replaced (an error says so); a
// missing rel is an error matching fs.ErrNotExist.
func (g *Gate) ReplaceWithSymlink(p, target string) error {
	rel, err := g.clean(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return &os.PathError{Op: "replace", Path: p, Err: unix.EINVAL}
	}
	dir, base := split(rel)
	fd, err := g.walk(dir, rel, walkLoose)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if g.afterWalk != nil {
		g.afterWalk(rel)
	}
	var st unix.Stat_t
	if err := fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "replace", Path: rel, Err: err}
	}
	if desc, ok := g.isProtected(idOf(&st)); ok {
		return protectedEntry(rel, desc)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fmt.Errorf("%s: it is a directory now", rel)
	}
	tmp := TempName(base, ".shiro-link")
	if err := unix.Symlinkat(target, fd, tmp); err != nil {
		return &os.PathError{Op: "symlink", Path: join(dir, tmp), Err: err}
	}
	if err := renameat(fd, tmp, fd, base); err != nil {
		_ = unlinkat(fd, tmp, 0)
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s: it is a directory now", rel)
		}
		return &os.PathError{Op: "rename", Path: rel, Err: err}
	}
	_ = unix.Fsync(fd)
	return nil
}

// TempName is a temporary name beside base: hidden, random, ending in
// suffix, and short enough to be a name (NAME_MAX is 255 bytes).
func TempName(base, suffix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	if len(base) > 100 {
		i := 100
		for i > 0 && !utf8.RuneStart(base[i]) {
			i--
		}
		base = base[:i]
	}
	return "." + base + "." + hex.EncodeToString(b[:]) + suffix
}

// The system calls, retried when a signal interrupts them.

func openDirAt(dirfd int, name string, nofollow bool) (int, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK | unix.O_CLOEXEC
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	return openat(dirfd, name, flags, 0)
}

func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func fstat(fd int, st *unix.Stat_t) error {
	for {
		if err := unix.Fstat(fd, st); err != unix.EINTR {
			return err
		}
	}
}

func fstatat(dirfd int, name string, st *unix.Stat_t, flags int) error {
	for {
		if err := unix.Fstatat(dirfd, name, st, flags); err != unix.EINTR {
			return err
		}
	}
}

func mkdirat(dirfd int, name string, mode uint32) error {
	for {
		if err := unix.Mkdirat(dirfd, name, mode); err != unix.EINTR {
			return err
		}
	}
}

func renameat(olddirfd int, oldname string, newdirfd int, newname string) error {
	for {
		if err := unix.Renameat(olddirfd, oldname, newdirfd, newname); err != unix.EINTR {
			return err
		}
	}
}

func unlinkat(dirfd int, name string, flags int) error {
	for {
		if err := unix.Unlinkat(dirfd, name, flags); err != unix.EINTR {
			return err
		}
	}
}
