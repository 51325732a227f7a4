package gitshadow

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The in-sandbox half: the helper runs these on the shadow (a git directory
// only the sandbox sees) when the host asks. Nothing here is trusted by the
// host: it checks everything it receives.

// Special tar entries.
const (
	// manifestEntry opens an export: what else the shadow holds.
	manifestEntry = ".shiro-manifest"
	// importEntry opens an import: what to delete.
	importEntry = ".shiro-import"
)

// manifest describes what an export does not carry: the host-only files
// present in the shadow (with a digest, so the host can say when the
// sandbox changed one) and the git directories the shadow holds beyond
// the layout's (a submodule added in the sandbox).
type manifest struct {
	HostFiles map[string]string `json:"hostFiles"`
	Extra     []string          `json:"extra,omitempty"`
}

// importHeader says what an import removes besides writing its files.
type importHeader struct {
	// MirrorRefs lists git directories whose loose refs must end up exactly
	// those in the import: any other loose ref file there is removed.
	MirrorRefs []string `json:"mirrorRefs,omitempty"`
	// Remove lists paths (relative to the root) to delete.
	Remove []string `json:"remove,omitempty"`
}

// Export writes, as a tar, the shadow's mirrored files that go both ways
// and every object file of its own (objects reached through alternates are
// the host's already), after a manifest entry.
func Export(w io.Writer, root string, l Layout) error {
	if err := l.Validate(); err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	m := manifest{HostFiles: map[string]string{}}
	type file struct{ rel, abs string }
	var files []file
	err := l.visit(root, func(rel string, fi fs.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return nil
		}
		switch l.classify(rel) {
		case bothWays:
			files = append(files, file{rel, filepath.Join(root, filepath.FromSlash(rel))})
		case fromHost:
			if b, err := readRegular(filepath.Join(root, filepath.FromSlash(rel)), maxMirroredFile); err == nil {
				sum := sha256.Sum256(b)
				m.HostFiles[rel] = hex.EncodeToString(sum[:])
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range l.GitDirs {
		objDir := path.Join(d, "objects")
		_ = walkFiles(root, objDir, func(rel string, fi fs.FileInfo) error {
			if fi.Mode().IsRegular() && isObjectFile(strings.TrimPrefix(rel, objDir+"/")) {
				files = append(files, file{rel, filepath.Join(root, filepath.FromSlash(rel))})
			}
			return nil
		})
		for _, sub := range []string{"modules", "worktrees"} {
			_ = walkGitDirs(root, path.Join(d, sub), func(rel string) {
				if !contains(l.GitDirs, rel) {
					m.Extra = append(m.Extra, rel)
				}
			})
		}
	}
	mb, _ := json.Marshal(m)
	if err := writeEntry(tw, manifestEntry, mb); err != nil {
		return err
	}
	for _, f := range files {
		if err := copyEntry(tw, f.rel, f.abs); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
	}
	return tw.Close()
}

// isObjectFile matches "xx/<38 hex>" and "pack/pack-<hex>.pack".
func isObjectFile(rel string) bool {
	if dir, name, ok := strings.Cut(rel, "/"); ok && len(dir) == 2 && !strings.Contains(name, "/") {
		return validOID(dir + name)
	}
	name, ok := strings.CutPrefix(rel, "pack/pack-")
	return ok && strings.HasSuffix(name, ".pack") && !strings.Contains(name, "/")
}

// walkGitDirs calls fn for every git directory below root/dir (submodules
// may nest their names in directories).
func walkGitDirs(root, dir string, fn func(rel string)) error {
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(dir)))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		rel := dir + "/" + e.Name()
		if isGitDir(filepath.Join(root, filepath.FromSlash(rel))) {
			fn(rel)
			continue
		}
		_ = walkGitDirs(root, rel, fn)
	}
	return nil
}

func writeEntry(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func copyEntry(tw *tar.Writer, name, abs string) error {
	f, err := os.OpenFile(abs, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: int64(fi.Mode().Perm()), Size: fi.Size()}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, fi.Size())
	return err
}

// Import applies a tar the host made: every file is written atomically
// under root (directories made as needed), then the header's removals are
// done.
func Import(r io.Reader, root string, l Layout) error {
	if err := l.Validate(); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	var hdr importHeader
	written := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read import: %w", err)
		}
		if h.Name == importEntry {
			if err := json.NewDecoder(tr).Decode(&hdr); err != nil {
				return fmt.Errorf("read import header: %w", err)
			}
			continue
		}
		if h.Typeflag != tar.TypeReg || !validRel(h.Name) {
			return fmt.Errorf("import: bad entry %q", h.Name)
		}
		dst := filepath.Join(root, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := copyFileAtomic(dst, tr, fs.FileMode(h.Mode)&0o777); err != nil {
			return fmt.Errorf("import %s: %w", h.Name, err)
		}
		written[h.Name] = true
	}
	for _, d := range hdr.MirrorRefs {
		if d != "" && !contains(l.GitDirs, d) {
			continue
		}
		refs := path.Join(d, refsDir)
		// git takes a directory without refs/ for no repository: all of
		// the host's refs may be packed.
		if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(refs)), 0o755); err != nil {
			return err
		}
		var stale []string
		_ = walkFiles(root, refs, func(rel string, fi fs.FileInfo) error {
			if !written[rel] && !strings.HasSuffix(rel, ".lock") {
				stale = append(stale, rel)
			}
			return nil
		})
		hdr.Remove = append(hdr.Remove, stale...)
	}
	for _, rel := range hdr.Remove {
		if !validRel(rel) {
			continue
		}
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(rel))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("import: remove %s: %w", rel, err)
		}
	}
	return nil
}

// Keep copies each (from, to) pair: a regular file's content, or a
// symlink as a symlink whose relative target is made absolute against
// from's directory. It is how a git directory's HEAD, gitfile or .git
// symlink found in the workspace moves to where only the sandbox sees it.
// It does what it can and reports the first failure.
func Keep(pairs [][2]string) error {
	var first error
	for _, p := range pairs {
		from, to := p[0], p[1]
		if err := keepOne(from, to); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func keepOne(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	fi, err := os.Lstat(from)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(from), target)
		}
		tmp := tempName(to)
		if err := os.Symlink(target, tmp); err != nil {
			return err
		}
		return os.Rename(tmp, to)
	}
	b, err := readRegular(from, maxGitfile*16)
	if err != nil {
		return err
	}
	return writeFileAtomic(to, b, 0o644)
}

// HelperMain runs the helper's git command line (after "helper git"):
//
//	export --root DIR --layout JSON   the shadow's tar on stdout
//	import --root DIR --layout JSON   a tar from stdin; the new fingerprint on stdout
//	keep FROM TO [FROM TO...]         copy items to sandbox-only storage
func HelperMain(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("git: want export, import or keep")
	}
	verb, rest := args[0], args[1:]
	if verb == "keep" {
		if len(rest) == 0 || len(rest)%2 != 0 {
			return errors.New("git keep: want FROM TO pairs")
		}
		var pairs [][2]string
		for i := 0; i < len(rest); i += 2 {
			pairs = append(pairs, [2]string{rest[i], rest[i+1]})
		}
		return Keep(pairs)
	}
	var root, layoutJSON string
	for i := 0; i+1 < len(rest); i += 2 {
		switch rest[i] {
		case "--root":
			root = rest[i+1]
		case "--layout":
			layoutJSON = rest[i+1]
		default:
			return fmt.Errorf("git %s: unknown flag %s", verb, rest[i])
		}
	}
	var l Layout
	if err := json.Unmarshal([]byte(layoutJSON), &l); err != nil {
		return fmt.Errorf("git %s: layout: %w", verb, err)
	}
	if !filepath.IsAbs(root) {
		return fmt.Errorf("git %s: --root must be absolute", verb)
	}
	switch verb {
	case "export":
		return Export(stdout, root, l)
	case "import":
		if err := Import(stdin, root, l); err != nil {
			return err
		}
		_, err := fmt.Fprintln(stdout, Fingerprint(root, l))
		return err
	}
	return fmt.Errorf("git: unknown command %q", verb)
}
