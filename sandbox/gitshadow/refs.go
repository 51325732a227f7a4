package gitshadow

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// importableRef reports whether a ref the sandbox made may reach the host:
// branches, tags, remote-tracking refs, notes and the stash. Others
// (refs/replace, which changes what git shows, refs/original, per-worktree
// refs) stay in the sandbox.
func importableRef(name string) bool {
	if name == "refs/stash" {
		return true
	}
	for _, p := range []string{"refs/heads/", "refs/tags/", "refs/remotes/", "refs/notes/"} {
		if strings.HasPrefix(name, p) {
			return validRefName(name)
		}
	}
	return false
}

// validRefName follows git check-ref-format for a full ref name.
func validRefName(name string) bool {
	if len(name) > 1024 || !strings.HasPrefix(name, "refs/") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".") || strings.Contains(name, "..") || strings.Contains(name, "@{") || name == "@" {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return false
		}
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	return true
}

// refValue is a ref's value: an object id, or "ref: <name>" for a
// symbolic ref.
type refValue = string

// parseRefValue checks the content of a loose ref or HEAD file.
func parseRefValue(b []byte) (refValue, bool) {
	s := strings.TrimRight(string(b), "\n")
	if strings.Contains(s, "\n") {
		return "", false
	}
	if t, ok := strings.CutPrefix(s, "ref: "); ok {
		return s, validRefName(t)
	}
	return s, validOID(s)
}

// logicalRefs returns the refs of one git directory of a snapshot: the
// packed ones, overridden by loose ones. Malformed entries are left out.
func logicalRefs(snap Snapshot, gitDir string) map[string]refValue {
	pre := ""
	if gitDir != "" {
		pre = gitDir + "/"
	}
	refs := map[string]refValue{}
	if packed, ok := snap[pre+"packed-refs"]; ok {
		for name, v := range parsePackedRefs(packed) {
			refs[name] = v
		}
	}
	for rel, b := range snap {
		name, ok := strings.CutPrefix(rel, pre+refsDir+"/")
		if !ok || (gitDir == "" && hasGitDirPrefix(rel)) {
			continue
		}
		name = "refs/" + name
		if v, ok := parseRefValue(b); ok && validRefName(name) {
			refs[name] = v
		}
	}
	return refs
}

// hasGitDirPrefix is set for paths inside a submodule's or worktree's git
// directory, which a common-directory lookup must skip.
func hasGitDirPrefix(rel string) bool {
	return strings.HasPrefix(rel, "modules/") || strings.HasPrefix(rel, "worktrees/")
}

// parsePackedRefs reads a packed-refs file: "<oid> <name>" lines, peeled
// "^<oid>" lines and a "#" header.
func parsePackedRefs(b []byte) map[string]refValue {
	refs := map[string]refValue{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		oid, name, ok := strings.Cut(line, " ")
		if ok && validOID(oid) && validRefName(name) {
			refs[name] = oid
		}
	}
	return refs
}

// hostRefs writes refs of one git directory on the host the way git does:
// a <file>.lock made exclusively, the value checked and written under it,
// renamed into place. Other shiro sessions are kept out by the Syncer's
// import lock; the .lock files keep the user's own git out, and the value
// read again under each lock tells shiro when that git got there first.
type hostRefs struct {
	dir string // the git directory
	// busy, when set, is called each time a lock is found held (a test's
	// seam to act while shiro waits).
	busy func(rel string)
}

var (
	// errLocked: a git on the host held a lock longer than lockWait.
	errLocked = errors.New("locked by another git process")
	// errChanged: the host's value was no longer the one the import
	// started from once the lock was taken.
	errChanged = errors.New("it changed in your repository meanwhile")
)

// lockWait is how long a lock of git's is waited for (git holds one for
// milliseconds).
const lockWait = 2 * time.Second

// fileLock is a held <file>.lock: what is written to it replaces the file
// on commit.
type fileLock struct {
	path string // the locked file
	f    *os.File
}

// lock takes rel's .lock as git does (created exclusively), waiting up to
// lockWait for a holder to finish.
func (h hostRefs) lock(rel string) (*fileLock, error) {
	p := filepath.Join(h.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(lockWait); ; time.Sleep(20 * time.Millisecond) {
		f, err := os.OpenFile(p+".lock", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return &fileLock{path: p, f: f}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %w", rel, errLocked)
		}
		if h.busy != nil {
			h.busy(rel)
		}
	}
}

// commit writes data and renames the lock over the file.
func (l *fileLock) commit(data []byte) error {
	_, err := l.f.Write(data)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(l.path+".lock", l.path)
	}
	if err != nil {
		os.Remove(l.path + ".lock")
	}
	return err
}

// release drops the lock, leaving the file as it was.
func (l *fileLock) release() {
	l.f.Close()
	os.Remove(l.path + ".lock")
}

// lockWrite replaces rel with data through rel.lock when unchanged (given
// the content under the lock, or nil and false when rel is missing)
// allows it; else the error is errChanged.
func (h hostRefs) lockWrite(rel string, data []byte, unchanged func(cur []byte, exists bool) bool) error {
	l, err := h.lock(rel)
	if err != nil {
		return err
	}
	cur, err := readRegular(l.path, maxMirroredFile)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.release()
		return err
	}
	if !unchanged(cur, exists) {
		l.release()
		return errChanged
	}
	return l.commit(data)
}

// remove deletes rel (a loose ref or a file) if it exists.
func (h hostRefs) remove(rel string) error {
	err := os.Remove(filepath.Join(h.dir, filepath.FromSlash(rel)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// current returns the host's value of a ref (loose, else packed; "" when
// it has none).
func (h hostRefs) current(name string) (refValue, error) {
	b, err := readRegular(filepath.Join(h.dir, filepath.FromSlash(name)), 4096)
	if err == nil {
		v, _ := parseRefValue(b)
		return v, nil
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return "", err
	}
	b, err = readRegular(filepath.Join(h.dir, "packed-refs"), maxMirroredFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return parsePackedRefs(b)[name], nil
}

// setRef writes a loose ref from old to v, with its reflog entry, under
// the ref's lock; a host whose value is not old any more is errChanged.
func (h hostRefs) setRef(name string, old, v refValue, msg string) error {
	l, err := h.lock(name)
	if err != nil {
		return err
	}
	if cur, err := h.current(name); err != nil || cur != old {
		l.release()
		if err == nil {
			err = errChanged
		}
		return err
	}
	h.appendLog(name, old, v, msg)
	return l.commit([]byte(v + "\n"))
}

// deleteRef removes a ref whose value is old, as git does: under the
// ref's lock, first from packed-refs (read again once its own lock is
// held, so that no change packed meanwhile is lost), then the loose file,
// so that a reader never sees an older packed value come back.
func (h hostRefs) deleteRef(name string, old refValue) error {
	l, err := h.lock(name)
	if err != nil {
		return err
	}
	defer l.release()
	if cur, err := h.current(name); err != nil || cur != old {
		if err == nil {
			err = errChanged
		}
		return err
	}
	if err := h.unpack(name); err != nil {
		return err
	}
	return h.remove(name)
}

// unpack drops name from packed-refs (with its peeled line), under
// packed-refs.lock.
func (h hostRefs) unpack(name string) error {
	pl, err := h.lock("packed-refs")
	if err != nil {
		return err
	}
	b, err := readRegular(pl.path, maxMirroredFile)
	if errors.Is(err, fs.ErrNotExist) {
		pl.release()
		return nil
	}
	if err != nil {
		pl.release()
		return err
	}
	var out bytes.Buffer
	dropPeeled := false
	changed := false
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "^") {
			if !dropPeeled {
				out.WriteString(line)
			}
			continue
		}
		dropPeeled = false
		if _, n, ok := strings.Cut(strings.TrimRight(line, "\n"), " "); ok && n == name && line[0] != '#' {
			dropPeeled, changed = true, true
			continue
		}
		out.WriteString(line)
	}
	if !changed {
		pl.release()
		return nil
	}
	return pl.commit(out.Bytes())
}

// appendLog adds a reflog entry for name when git keeps one for it (its
// log exists, or it is a branch or HEAD and logs/ exists).
func (h hostRefs) appendLog(name string, old, new refValue, msg string) {
	p := filepath.Join(h.dir, "logs", filepath.FromSlash(name))
	if _, err := os.Stat(p); err != nil {
		if _, derr := os.Stat(filepath.Join(h.dir, "logs")); derr != nil || !(name == "HEAD" || strings.HasPrefix(name, "refs/heads/")) {
			return
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return
		}
	}
	zero := strings.Repeat("0", oidLen)
	if !validOID(old) {
		old = zero
	}
	if !validOID(new) {
		new = zero
	}
	_, offset := time.Now().Zone()
	sign := '+'
	if offset < 0 {
		sign, offset = '-', -offset
	}
	line := fmt.Sprintf("%s %s shiro sandbox <shiro@sandbox> %d %c%02d%02d\t%s\n", old, new, time.Now().Unix(), sign, offset/3600, offset%3600/60, msg)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	f.WriteString(line) //nolint:errcheck // a reflog entry is a courtesy
	f.Close()
}

// validStashLog checks logs/refs/stash: "<old> <new> <ident> <time> <tz>\t<msg>" lines.
func validStashLog(b []byte) bool {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		head, _, ok := strings.Cut(line, "\t")
		f := strings.Fields(head)
		if !ok || len(f) < 4 || !validOID(f[0]) || !validOID(f[1]) {
			return false
		}
	}
	return !bytes.ContainsRune(b, 0)
}

// validOIDLines checks files that hold object ids, one per line
// (ORIG_HEAD, MERGE_HEAD, shallow…).
func validOIDLines(b []byte) bool {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for _, l := range lines {
		if !validOID(l) {
			return false
		}
	}
	return len(lines) > 0
}

func sortedRefNames(m map[string]refValue) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
