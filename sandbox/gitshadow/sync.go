package gitshadow

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shiroagent/shiro/internal/flock"
	"github.com/shiroagent/shiro/sandbox"
)

// Runner runs a command in the sandbox: the session's channel.
type Runner interface {
	Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error)
}

// Syncer keeps a shadow git directory in the sandbox and the host's real
// one in step around every command. The host's git directory is never
// visible writable in the sandbox: the sandbox sees the shadow (same
// path), whose objects reach the host's through alternates. Before a
// command, what changed on the host is copied in; after it, what the
// sandbox changed in its objects, refs, HEAD, index and merge state is
// checked and written on the host, unless the host changed the same thing
// meanwhile. Configuration, hooks and everything else stay in the sandbox.
type Syncer struct {
	repo   *Repo
	layout Layout
	run    Runner
	// helper is the argv that starts the helper's git commands in the
	// sandbox ("<helper>", "helper", "git").
	helper []string
	// hostMount is where the host's common directory is mounted read-only
	// in the sandbox, for the shadow's alternates.
	hostMount string
	// importLock is the file whose flock makes one import into the host's
	// common directory at a time, across shiro processes and sessions
	// (ImportLockPath); lockWait bounds the wait for it.
	importLock string
	lockWait   time.Duration
	// readOnly stops imports (a SHA-256 or reftable repository, or one
	// with extensions shiro does not know): the sandbox keeps its changes.
	readOnly string

	// host fingerprints the host's git directory, again only after a change.
	host *Fingerprinter

	mu       sync.Mutex
	base     state             // what both sides agreed on last
	hostFP   string            // the host's fingerprint after the last sync
	shadowFP string            // the shadow's fingerprint after the last sync
	noticed  map[string]string // sandbox-only changes already reported, by digest
}

// state is the mirrored content of one side, refs taken logically (a ref
// is the same whether loose or packed).
type state struct {
	refs  map[string]map[string]refValue // git directory → ref → value
	files Snapshot                       // every other mirrored file
}

// stateOf splits a snapshot into refs and files.
func (s *Syncer) stateOf(snap Snapshot) state {
	st := state{refs: map[string]map[string]refValue{}, files: Snapshot{}}
	for _, gd := range s.refDirs() {
		st.refs[gd] = logicalRefs(snap, gd)
	}
	for rel, b := range snap {
		if s.layout.classify(rel) == notMirrored || isRefFile(s.layout, rel) {
			continue
		}
		st.files[rel] = b
	}
	return st
}

// refDirs are the git directories that hold refs (all but a linked
// worktree's).
func (s *Syncer) refDirs() []string {
	var out []string
	for _, d := range s.layout.GitDirs {
		if d == "" || d != s.layout.Worktree {
			out = append(out, d)
		}
	}
	return out
}

// isRefFile reports packed-refs and loose ref files.
func isRefFile(l Layout, rel string) bool {
	_, name := l.split(rel)
	return name == "packed-refs" || strings.HasPrefix(name, refsDir+"/")
}

// NewSyncer prepares the shadow of repo. helper is the argv prefix of the
// helper's git commands in the sandbox; hostMount where the host's common
// directory is mounted read-only there; lockDir the directory of shiro's
// own state on the host that holds the import locks (ImportLockPath).
func NewSyncer(repo *Repo, run Runner, helper []string, hostMount, lockDir string) *Syncer {
	s := &Syncer{repo: repo, layout: LayoutOf(repo), run: run, helper: helper, hostMount: hostMount, noticed: map[string]string{},
		importLock: ImportLockPath(lockDir, repo.CommonDir), lockWait: importLockWait}
	s.host = NewFingerprinter(repo.CommonDir, s.layout)
	s.readOnly = unsupportedRepo(repo.CommonDir)
	return s
}

// importLockWait bounds the wait for another session's import into the
// same repository: one holding the lock longer is taken for stuck, and
// this import waits for the next sync.
const importLockWait = 30 * time.Second

// ErrImportBusy is the cause of an import lock not taken in time.
var ErrImportBusy = errors.New("another shiro session is still copying its sandbox's git changes into this repository")

// ImportLockPath is the import lock of the repository whose common git
// directory is commonDir, under lockDir (in shiro's state on the host,
// where no sandbox reaches: the sandbox sees the common directory itself
// read-only, and a read-only file is enough to hold an flock). It is
// keyed by the common directory's real path, so every worktree of one
// repository shares it.
func ImportLockPath(lockDir, commonDir string) string {
	if real, err := filepath.EvalSymlinks(commonDir); err == nil {
		commonDir = real
	}
	sum := sha256.Sum256([]byte(filepath.Clean(commonDir)))
	return filepath.Join(lockDir, hex.EncodeToString(sum[:])[:32]+".lock")
}

// lockImports takes the repository's import lock, waiting up to lockWait.
// Everything that reads the host's git directory to compare it or writes
// it runs under this lock, so that two sessions' imports never interleave
// (a ref checked by one and written by the other meanwhile, packed-refs
// rewritten from a stale read).
func (s *Syncer) lockImports(ctx context.Context) (func(), error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.lockWait, ErrImportBusy)
	defer cancel()
	unlock, err := flock.Lock(ctx, s.importLock)
	if err != nil {
		if errors.Is(err, ErrImportBusy) {
			return nil, fmt.Errorf("%w (it has held %s for more than %s)", ErrImportBusy, s.importLock, s.lockWait)
		}
		return nil, fmt.Errorf("take the import lock %s: %w", s.importLock, err)
	}
	return unlock, nil
}

// Close releases the watches on the host's git directory.
func (s *Syncer) Close() { s.host.Close() }

// Layout is the shadow's layout (for the helper's fingerprint).
func (s *Syncer) Layout() Layout { return s.layout }

// unsupportedRepo names why a repository cannot be mirrored back, or "".
func unsupportedRepo(commonDir string) string {
	b, err := readRegular(filepath.Join(commonDir, "config"), 1<<20)
	if err != nil {
		return ""
	}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = strings.ToLower(strings.TrimSpace(strings.Trim(line, "[]")))
			continue
		}
		if section != "extensions" || line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.ToLower(strings.TrimSpace(v))
		switch {
		case k == "objectformat" && v != "sha1":
			return "it uses " + v + " object ids"
		case k == "refstorage" && v != "files":
			return "it keeps refs in " + v
		case k == "worktreeconfig", k == "noop", k == "preciousobjects", k == "partialclone", k == "objectformat", k == "refstorage":
		default:
			return "it uses the git extension " + k
		}
	}
	return ""
}

// Init fills the shadow from the host: every mirrored file, and
// alternates that point at the host's objects. Whatever the shadow held
// from an earlier session is replaced.
func (s *Syncer) Init(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	host, err := s.readHostLocked(ctx)
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	for rel, b := range host {
		files[rel] = b
	}
	for _, d := range s.refDirs() {
		files[path.Join(d, "objects/info/alternates")] = []byte(path.Join(s.hostMount, d, "objects") + "\n")
	}
	// A file the host lacks is removed, so that a stale MERGE_HEAD or
	// similar from an earlier session does not linger in the shadow.
	var remove []string
	for _, d := range s.layout.GitDirs {
		for _, f := range append(append(append([]string{}, worktreeFiles...), sharedFiles...), hostFiles...) {
			rel := path.Join(d, f)
			if _, ok := host[rel]; !ok && s.layout.classify(rel) != notMirrored {
				remove = append(remove, rel)
			}
		}
	}
	if err := s.push(ctx, files, importHeader{MirrorRefs: s.refDirs(), Remove: remove}); err != nil {
		return err
	}
	s.base = s.stateOf(host)
	return nil
}

// readHost reads the host's mirrored files and notes its fingerprint.
func (s *Syncer) readHost() (Snapshot, error) {
	fp := s.host.Fingerprint()
	snap, err := ReadSnapshot(s.repo.CommonDir, s.layout)
	if err != nil {
		return nil, fmt.Errorf("read the repository's git directory: %w", err)
	}
	out := Snapshot{}
	for rel, b := range snap {
		if s.layout.classify(rel) != notMirrored {
			out[rel] = b
		}
	}
	s.hostFP = fp
	return out, nil
}

// readHostLocked reads the host's mirrored files under the import lock:
// never half of another session's import.
func (s *Syncer) readHostLocked(ctx context.Context) (Snapshot, error) {
	unlock, err := s.lockImports(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.readHost()
}

// Before brings the host's changes into the shadow, after importing what
// the sandbox changed since the last sync (shadowFP is the fingerprint the
// helper last reported).
func (s *Syncer) Before(ctx context.Context, shadowFP string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if shadowFP != "" && shadowFP != s.shadowFP {
		return s.pull(ctx, shadowFP)
	}
	if s.host.Fingerprint() == s.hostFP {
		return nil, nil
	}
	return nil, s.pushHostChanges(ctx, nil, nil)
}

// After imports what the command changed in the shadow.
func (s *Syncer) After(ctx context.Context, shadowFP string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if shadowFP == "" || shadowFP == s.shadowFP {
		return nil, nil
	}
	return s.pull(ctx, shadowFP)
}

// pushHostChanges copies into the shadow what the host changed since the
// agreed state, the forced files and the ref sets of the forced git
// directories (sandbox changes that were not taken: the host's version
// goes back), and removes the given paths (objects now on the host). The
// agreed state becomes the host's.
func (s *Syncer) pushHostChanges(ctx context.Context, force map[string]bool, remove []string) error {
	snap, err := s.readHostLocked(ctx)
	if err != nil {
		return err
	}
	return s.pushSnapshot(ctx, snap, force, remove)
}

// pushSnapshot is pushHostChanges with the host's files read (snap).
func (s *Syncer) pushSnapshot(ctx context.Context, snap Snapshot, force map[string]bool, remove []string) error {
	host := s.stateOf(snap)
	files := map[string][]byte{}
	hdr := importHeader{Remove: remove}
	for rel, b := range host.files {
		if old, ok := s.base.files[rel]; !ok || !bytes.Equal(b, old) || force[rel] {
			files[rel] = b
		}
	}
	for rel := range s.base.files {
		if _, ok := host.files[rel]; !ok {
			hdr.Remove = append(hdr.Remove, rel)
		}
	}
	for rel := range force {
		if _, ok := host.files[rel]; !ok && !isRefFile(s.layout, rel) {
			hdr.Remove = append(hdr.Remove, rel)
		}
	}
	// A ref change sends the git directory's whole ref set, so that the
	// shadow's refs end up exactly the host's.
	for _, gd := range s.refDirs() {
		if equalRefs(host.refs[gd], s.base.refs[gd]) && !force["refs:"+gd] {
			continue
		}
		for rel, b := range snap {
			if g, _ := s.layout.split(rel); g == gd && isRefFile(s.layout, rel) {
				files[rel] = b
			}
		}
		if _, ok := snap[path.Join(gd, "packed-refs")]; !ok {
			hdr.Remove = append(hdr.Remove, path.Join(gd, "packed-refs"))
		}
		hdr.MirrorRefs = append(hdr.MirrorRefs, gd)
	}
	if len(files) > 0 || len(hdr.Remove) > 0 || len(hdr.MirrorRefs) > 0 {
		if err := s.push(ctx, files, hdr); err != nil {
			return err
		}
	}
	s.base = host
	return nil
}

func equalRefs(a, b map[string]refValue) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// push runs the helper's import with files and hdr; the helper answers
// with the shadow's new fingerprint.
func (s *Syncer) push(ctx context.Context, files map[string][]byte, hdr importHeader) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hb, _ := json.Marshal(hdr)
	if err := writeEntry(tw, importEntry, hb); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := writeEntry(tw, n, files[n]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	res, err := s.run.Run(ctx, sandbox.Command{
		Args:   s.helperArgs("import"),
		Stdin:  &buf,
		Stdout: &limitedBuffer{max: 256, buf: &stdout},
		Stderr: &limitedBuffer{max: 4096, buf: &stderr},
	})
	if err != nil {
		return fmt.Errorf("update the sandbox's git directory: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("update the sandbox's git directory: exit %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	s.shadowFP = strings.TrimSpace(stdout.String())
	return nil
}

func (s *Syncer) helperArgs(verb string) []string {
	lb, _ := json.Marshal(s.layout)
	return append(append([]string{}, s.helper...), verb, "--root", s.repo.CommonDir, "--layout", string(lb))
}

// export is what the helper's export returned.
type export struct {
	manifest manifest
	files    Snapshot          // mirrored files that go both ways
	loose    map[string][]byte // objects/xx/yyyy (with the git directory) → zlib data
	packs    map[string]string // .pack path in the shadow → a temporary file on the host
}

func (e *export) cleanup() {
	for _, tmp := range e.packs {
		os.Remove(tmp)
	}
}

// fetch runs the helper's export and reads its tar.
func (s *Syncer) fetch(ctx context.Context) (*export, error) {
	pr, pw := io.Pipe()
	type result struct {
		exp *export
		err error
	}
	done := make(chan result, 1)
	go func() {
		exp, err := s.readExport(pr)
		_, _ = io.Copy(io.Discard, pr) // let the command finish
		done <- result{exp, err}
	}()
	var stderr bytes.Buffer
	res, err := s.run.Run(ctx, sandbox.Command{
		Args:   s.helperArgs("export"),
		Stdout: pw,
		Stderr: &limitedBuffer{max: 4096, buf: &stderr},
	})
	pw.Close()
	r := <-done
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	if err == nil {
		err = r.err
	}
	if err != nil {
		if r.exp != nil {
			r.exp.cleanup()
		}
		return nil, fmt.Errorf("read the sandbox's git directory: %w", err)
	}
	return r.exp, nil
}

func (s *Syncer) readExport(r io.Reader) (*export, error) {
	exp := &export{files: Snapshot{}, loose: map[string][]byte{}, packs: map[string]string{}}
	tr := tar.NewReader(r)
	first := true
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return exp, err
		}
		if first {
			first = false
			if h.Name != manifestEntry {
				return exp, errors.New("export without a manifest")
			}
			if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&exp.manifest); err != nil {
				return exp, fmt.Errorf("manifest: %w", err)
			}
			continue
		}
		if h.Typeflag != tar.TypeReg || !validRel(h.Name) {
			return exp, fmt.Errorf("bad entry %q", h.Name)
		}
		gd, name := s.layout.split(h.Name)
		switch {
		case strings.HasPrefix(name, "objects/pack/"):
			dir := filepath.Join(s.repo.CommonDir, filepath.FromSlash(gd), "objects", "pack")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return exp, err
			}
			tmp := filepath.Join(dir, ".tmp-shiro-import-"+randomHex())
			f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
			if err != nil {
				return exp, err
			}
			_, err = io.Copy(f, tr)
			f.Close()
			exp.packs[h.Name] = tmp
			if err != nil {
				return exp, err
			}
		case strings.HasPrefix(name, "objects/"):
			b, err := io.ReadAll(io.LimitReader(tr, maxPackObjectBytes))
			if err != nil {
				return exp, err
			}
			exp.loose[h.Name] = b
		default:
			if s.layout.classify(h.Name) != bothWays {
				return exp, fmt.Errorf("unexpected entry %q", h.Name)
			}
			b, err := io.ReadAll(io.LimitReader(tr, maxMirroredFile))
			if err != nil {
				return exp, err
			}
			exp.files[h.Name] = b
		}
	}
	return exp, nil
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// pull imports what the sandbox changed, then puts right in the shadow
// what was not taken and what the host changed meanwhile.
func (s *Syncer) pull(ctx context.Context, shadowFP string) ([]string, error) {
	exp, err := s.fetch(ctx)
	if err != nil {
		return nil, err
	}
	defer exp.cleanup()
	var notices []string
	notice := func(format string, args ...any) { notices = append(notices, fmt.Sprintf(format, args...)) }

	s.noticeSandboxOnly(exp, notice)
	shadow := s.stateOf(exp.files)
	if s.readOnly != "" {
		s.shadowFP = shadowFP
		if !s.sameBothWays(shadow) && s.noticed["readonly"] == "" {
			s.noticed["readonly"] = "1"
			notice("git changes made in the sandbox stay there: shiro does not copy them to this repository because %s", s.readOnly)
		}
		return notices, nil
	}

	// From the first look at the host's objects to the last write, one
	// import at a time. The wait is bounded: when another session holds
	// the lock too long, nothing is taken now, and since the shadow's
	// fingerprint stays unsynced the next sync tries again.
	unlock, err := s.lockImports(ctx)
	if err != nil {
		if errors.Is(err, ErrImportBusy) {
			notice("git changes made in the sandbox are not in your repository yet: %v; they stay in the sandbox, and shiro copies them at the next command", err)
			return notices, nil
		}
		return notices, err
	}
	snap, force, imported, err := s.importLocked(exp, shadow, notice)
	unlock()
	if err != nil {
		return notices, err
	}
	s.shadowFP = shadowFP
	// The shadow reaches imported objects through alternates now.
	return notices, s.pushSnapshot(ctx, snap, force, imported)
}

// importLocked writes what the sandbox changed to the host, under the
// import lock, and returns the host's files as they are then, the shadow
// files to put right and the loose objects imported.
func (s *Syncer) importLocked(exp *export, shadow state, notice func(string, ...any)) (Snapshot, map[string]bool, []string, error) {
	// Objects first: they are only data, and refs may name them.
	stores := map[string]*objectStore{}
	store := func(gd string) *objectStore {
		if stores[gd] == nil {
			stores[gd] = newObjectStore(filepath.Join(s.repo.CommonDir, filepath.FromSlash(gd)))
		}
		return stores[gd]
	}
	var imported []string
	for _, rel := range sortedKeys(exp.loose) {
		gd, name := s.layout.split(rel)
		oid := strings.ReplaceAll(strings.TrimPrefix(name, "objects/"), "/", "")
		if err := store(gd).importLoose(oid, exp.loose[rel]); err != nil {
			notice("an object the sandbox wrote was not imported: %v", err)
			continue
		}
		imported = append(imported, rel)
	}
	// Packs are imported but left in the shadow: git may be writing a
	// pack's index beside it right now. The next export skips them by name.
	for _, rel := range sortedKeys(exp.packs) {
		gd, _ := s.layout.split(rel)
		if err := store(gd).importPack(exp.packs[rel], path.Base(rel)); err != nil {
			notice("a pack the sandbox wrote was not imported: %v", err)
		}
	}

	snap, err := s.readHost()
	if err != nil {
		return nil, nil, nil, err
	}
	host := s.stateOf(snap)
	force := map[string]bool{}
	others := s.otherCheckouts()
	for _, gd := range s.refDirs() {
		var busy map[string]string
		if gd == "" {
			busy = others
		}
		s.pullRefs(gd, shadow.refs[gd], host.refs[gd], store(gd), busy, force, notice)
	}
	s.pullFiles(shadow.files, host.files, store, force, notice)
	// What the shadow gets back: the host after this import.
	if snap, err = s.readHost(); err != nil {
		return nil, nil, nil, err
	}
	return snap, force, imported, nil
}

func (s *Syncer) sameBothWays(shadow state) bool {
	for _, gd := range s.refDirs() {
		if !equalRefs(shadow.refs[gd], s.base.refs[gd]) {
			return false
		}
	}
	for rel, b := range s.base.files {
		if s.layout.classify(rel) == bothWays && !bytes.Equal(b, shadow.files[rel]) {
			return false
		}
	}
	for rel := range shadow.files {
		if _, ok := s.base.files[rel]; !ok {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// noticeSandboxOnly reports, once each, host-only files the sandbox changed
// and git directories it made.
func (s *Syncer) noticeSandboxOnly(exp *export, notice func(string, ...any)) {
	for rel, digest := range exp.manifest.HostFiles {
		want := ""
		if b, ok := s.base.files[rel]; ok {
			sum := sha256.Sum256(b)
			want = hex.EncodeToString(sum[:])
		}
		if digest == want || s.noticed[rel] == digest {
			continue
		}
		s.noticed[rel] = digest
		notice("the sandbox changed .git/%s; the change stays in the sandbox (git on your machine never runs what the sandbox writes there)", rel)
	}
	for _, d := range exp.manifest.Extra {
		if s.noticed["dir:"+d] != "" {
			continue
		}
		s.noticed["dir:"+d] = "1"
		notice("the sandbox made the git directory .git/%s; it stays in the sandbox", d)
	}
}

// otherCheckouts maps each branch checked out in a worktree of the
// repository other than the workspace's (the main worktree, unless the
// repository is bare, and every linked one) to that worktree, as the
// host has them now.
func (s *Syncer) otherCheckouts() map[string]string {
	out := map[string]string{}
	branch := func(gitDir string) string {
		b, err := readRegular(filepath.Join(gitDir, "HEAD"), 4096)
		if err != nil {
			return ""
		}
		v, ok := parseRefValue(b)
		if t, isRef := strings.CutPrefix(v, "ref: "); ok && isRef && strings.HasPrefix(t, "refs/heads/") {
			return t
		}
		return ""
	}
	common := s.repo.CommonDir
	if s.layout.Worktree != "" && !bareRepo(common) {
		if b := branch(common); b != "" {
			out[b] = filepath.Dir(common)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(common, "worktrees"))
	for _, e := range entries {
		if !e.IsDir() || "worktrees/"+e.Name() == s.layout.Worktree {
			continue
		}
		gd := filepath.Join(common, "worktrees", e.Name())
		b := branch(gd)
		if b == "" {
			continue
		}
		where := "the worktree " + e.Name()
		if back, err := readPointer(filepath.Join(gd, "gitdir"), ""); err == nil {
			where = filepath.Dir(joinFrom(gd, back))
		}
		out[b] = where
	}
	return out
}

// bareRepo reports core.bare = true in the common directory's config.
func bareRepo(commonDir string) bool {
	b, err := readRegular(filepath.Join(commonDir, "config"), 1<<20)
	if err != nil {
		return false
	}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = strings.ToLower(strings.TrimSpace(strings.Trim(line, "[]")))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if section == "core" && ok && strings.EqualFold(strings.TrimSpace(k), "bare") {
			return strings.EqualFold(strings.TrimSpace(v), "true")
		}
	}
	return false
}

// pullRefs applies the sandbox's ref changes of one git directory to the
// host; the agreed state follows each ref applied. A branch checked out
// in another worktree (elsewhere: branch → worktree) is not moved: that
// worktree's checkout would change under its user.
func (s *Syncer) pullRefs(gd string, sRefs, hRefs map[string]refValue, objs *objectStore, elsewhere map[string]string, force map[string]bool, notice func(string, ...any)) {
	bRefs := s.base.refs[gd]
	if bRefs == nil {
		bRefs = map[string]refValue{}
		s.base.refs[gd] = bRefs
	}
	h := hostRefs{dir: filepath.Join(s.repo.CommonDir, filepath.FromSlash(gd))}
	names := map[string]bool{}
	for n := range sRefs {
		names[n] = true
	}
	for n := range bRefs {
		names[n] = true
	}
	for _, name := range sortedKeys(names) {
		sv, bv, hv := sRefs[name], bRefs[name], hRefs[name]
		if sv == bv {
			continue
		}
		refuse := func(why string) {
			notice("%s %s stays in the sandbox: %s", where(gd), name, why)
			force["refs:"+gd] = true
		}
		switch {
		case !importableRef(name):
			refuse("only branches, tags, remote-tracking refs, notes and the stash are copied to your repository")
			continue
		case hv != bv:
			refuse(fmt.Sprintf("it changed in your repository meanwhile (now %s); the sandbox's %s is kept as an object", short(hv), short(sv)))
			continue
		case elsewhere[name] != "":
			refuse(fmt.Sprintf("it is the branch checked out in %s, another worktree of this repository, which shiro does not change from this sandbox (the sandbox has it at %s)", elsewhere[name], short(sv)))
			continue
		}
		if sv == "" {
			if err := h.deleteRef(name, bv); err != nil {
				refuse(err.Error())
				continue
			}
			h.appendLog(name, bv, "", "shiro: deleted in the sandbox")
			notice("%s %s was deleted in the sandbox (it was %s)", where(gd), name, short(bv))
			delete(bRefs, name)
			continue
		}
		if t, ok := strings.CutPrefix(sv, "ref: "); ok {
			if !validRefName(t) {
				refuse("bad symbolic ref")
				continue
			}
		} else if err := objs.connected(sv); err != nil {
			refuse(err.Error())
			continue
		}
		if err := h.setRef(name, bv, sv, "shiro: updated in the sandbox"); err != nil {
			refuse(err.Error())
			continue
		}
		bRefs[name] = sv
	}
}

// pullFiles applies the sandbox's changes to HEAD, the index, merge state,
// shallow and the stash's log; the agreed state follows each file applied.
func (s *Syncer) pullFiles(shadow, host Snapshot, store func(string) *objectStore, force map[string]bool, notice func(string, ...any)) {
	names := map[string]bool{}
	for _, snap := range []Snapshot{shadow, s.base.files} {
		for rel := range snap {
			if s.layout.classify(rel) == bothWays {
				names[rel] = true
			}
		}
	}
	for _, rel := range sortedKeys(names) {
		sv, sok := shadow[rel]
		bv, bok := s.base.files[rel]
		hv, hok := host[rel]
		if sok == bok && bytes.Equal(sv, bv) {
			continue
		}
		gd, name := s.layout.split(rel)
		refuse := func(why string) {
			notice(".git/%s stays in the sandbox: %s", rel, why)
			force[rel] = true
		}
		unchanged := func(hv []byte, hok bool) bool {
			return hok == bok && (bytes.Equal(hv, bv) || name == "index" && sameStaging(hv, bv))
		}
		if !unchanged(hv, hok) {
			refuse(errChanged.Error())
			continue
		}
		h := hostRefs{dir: filepath.Join(s.repo.CommonDir, filepath.FromSlash(gd))}
		if !sok {
			if name == "HEAD" || name == "index" {
				refuse("the sandbox removed it")
				continue
			}
			if err := h.remove(name); err != nil {
				refuse(err.Error())
				continue
			}
			delete(s.base.files, rel)
			continue
		}
		if err := validateFile(name, sv, store(gd)); err != nil {
			refuse(err.Error())
			continue
		}
		if name == "index" {
			// A gitlink makes git on the host go into its directory as a
			// submodule's worktree, whatever repository is there: only the
			// submodules the host already had are taken.
			if added := newGitlinks(sv, bv); len(added) > 0 {
				refuse(fmt.Sprintf("it adds the submodule path %s, which your repository's index does not have (git on your machine would go into it)", strings.Join(added, ", ")))
				continue
			}
		}
		// Checked again under the file's lock: a git on the host may have
		// written it since the snapshot.
		if err := h.lockWrite(name, sv, unchanged); err != nil {
			refuse(err.Error())
			continue
		}
		if name == "HEAD" {
			old, _ := parseRefValue(bv)
			nv, _ := parseRefValue(sv)
			h.appendLog("HEAD", old, nv, "shiro: HEAD moved in the sandbox")
		}
		s.base.files[rel] = sv
	}
}

// validateFile checks one mirrored file the sandbox wrote.
func validateFile(name string, b []byte, objs *objectStore) error {
	switch name {
	case "HEAD":
		v, ok := parseRefValue(b)
		if !ok {
			return errors.New("not a valid HEAD")
		}
		if t, isRef := strings.CutPrefix(v, "ref: "); isRef {
			if !strings.HasPrefix(t, "refs/heads/") {
				return errors.New("HEAD names no branch")
			}
			return nil
		}
		return objs.connected(v)
	case "index":
		return validateIndex(b)
	case "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "shallow":
		if !validOIDLines(b) {
			return errors.New("not a list of object ids")
		}
		return nil
	case "MERGE_MSG", "MERGE_MODE":
		if bytes.ContainsRune(b, 0) || len(b) > 1<<20 {
			return errors.New("not text")
		}
		return nil
	case "logs/refs/stash":
		if !validStashLog(b) {
			return errors.New("not a reflog")
		}
		return nil
	}
	return fmt.Errorf("%s is not copied", name)
}

func where(gd string) string {
	if gd == "" {
		return "ref"
	}
	return "ref of .git/" + gd + ":"
}

func short(v refValue) string {
	switch {
	case v == "":
		return "(none)"
	case validOID(v):
		return v[:12]
	}
	return v
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	max int
	buf *bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		l.buf.Write(p[:room])
	}
	return len(p), nil
}
