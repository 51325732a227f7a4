package docker

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/shiroagent/shiro/internal/confine"
)

// buildContext is the part of a directory a build sends to the engine: every
// file .dockerignore lets through, walked through an os.Root so that no
// symlink leads outside it (symlinks are sent as symlinks, never followed).
// Files and directories are opened without blocking and checked on the
// descriptor: one swapped for a FIFO after the scan fails the build
// instead of stalling it.
type buildContext struct {
	// root is the directory, for the scan and the hash.
	root    *os.Root
	entries []contextEntry
	// dockerfile is the Dockerfile's slash path inside the archive.
	dockerfile string
	// extra is the Dockerfile's content when it lives outside the context
	// directory; it is added to the archive as dockerfile.
	extra []byte
	hash  string
}

// contextEntry is one file, directory or symlink of a build context.
type contextEntry struct {
	name  string // slash-separated, relative to the context root
	mode  fs.FileMode
	size  int64
	link  string
	mtime time.Time
}

// maxDockerfile bounds a Dockerfile read on the host.
const maxDockerfile = 4 << 20

// maxContextEntries bounds a build context: a context that holds a whole
// home directory is a mistake better reported than sent.
const maxContextEntries = 200_000

// scanContext lists the files of root that .dockerignore lets through.
// dockerfile is the Dockerfile's slash path inside root, or "" when it
// lives elsewhere. The Dockerfile and .dockerignore are always sent, as
// the docker CLI does, even when .dockerignore names them.
func scanContext(root *os.Root, dockerfile string) ([]contextEntry, error) {
	patterns, err := readDockerignore(root)
	if err != nil {
		return nil, err
	}
	if len(patterns) > 0 {
		if keep, _ := patternmatcher.MatchesOrParentMatches(".dockerignore", patterns); keep {
			patterns = append(patterns, "!.dockerignore")
		}
		if dockerfile != "" {
			if keep, _ := patternmatcher.MatchesOrParentMatches(dockerfile, patterns); keep {
				patterns = append(patterns, "!"+dockerfile)
			}
		}
	}
	var pm *patternmatcher.PatternMatcher
	if len(patterns) > 0 {
		if pm, err = patternmatcher.New(patterns); err != nil {
			return nil, fmt.Errorf(".dockerignore: %w", err)
		}
	}
	var out []contextEntry
	var walk func(dir string, parent patternmatcher.MatchInfo) error
	walk = func(dir string, parent patternmatcher.MatchInfo) error {
		f, err := root.OpenFile(dir, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return err
		}
		slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, d := range ents {
			name := d.Name()
			if dir != "." {
				name = dir + "/" + name
			}
			info := patternmatcher.MatchInfo{}
			skip := false
			if pm != nil {
				if skip, info, err = pm.MatchesUsingParentResults(name, parent); err != nil {
					return fmt.Errorf(".dockerignore: %w", err)
				}
			}
			if skip {
				// An ignored directory is still entered when an exception
				// (!dir/file) may bring something inside it back.
				if d.IsDir() && mayReinclude(pm, name) {
					if err := walk(name, info); err != nil {
						return err
					}
				}
				continue
			}
			fi, err := d.Info() // lstat: a symlink is not followed
			if err != nil {
				return err
			}
			e := contextEntry{name: name, mode: fi.Mode(), mtime: fi.ModTime()}
			switch {
			case fi.Mode().IsRegular():
				e.size = fi.Size()
			case fi.Mode()&fs.ModeSymlink != 0:
				if e.link, err = root.Readlink(name); err != nil {
					return err
				}
			case fi.IsDir():
			default:
				continue // sockets, devices, pipes: never part of a build
			}
			out = append(out, e)
			if len(out) > maxContextEntries {
				return fmt.Errorf("more than %d files: add a .dockerignore", maxContextEntries)
			}
			if fi.IsDir() {
				if err := walk(name, info); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(".", patternmatcher.MatchInfo{}); err != nil {
		return nil, fmt.Errorf("read the build context: %w", err)
	}
	return out, nil
}

// mayReinclude reports whether an exception pattern may bring back a file
// under the ignored directory dir (the docker CLI's rule).
func mayReinclude(pm *patternmatcher.PatternMatcher, dir string) bool {
	if !pm.Exclusions() {
		return false
	}
	for _, p := range pm.Patterns() {
		if p.Exclusion() && strings.HasPrefix(p.String()+"/", dir+"/") {
			return true
		}
	}
	return false
}

// readDockerignore reads the context's .dockerignore, if it has one.
func readDockerignore(root *os.Root) ([]string, error) {
	f, err := confine.OpenRegular(root, ".dockerignore")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read .dockerignore: %w", err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read .dockerignore: %w", err)
	}
	return patterns, nil
}

// contextHashVersion changes when what goes into the hash changes.
const contextHashVersion = "shiro-context-v1"

// hashContext digests everything that decides the image: every entry's
// name, type, permissions, link target and content (not its time, so a
// checkout that only touches files reuses the image), the Dockerfile and
// the build's parameters (args, target).
func (bc *buildContext) hashContext(args map[string]*string, target string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", contextHashVersion, bc.dockerfile, target)
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := "\x01" // unset, as opposed to empty
		if args[k] != nil {
			v = *args[k]
		}
		fmt.Fprintf(h, "arg\x00%s\x00%s\x00", k, v)
	}
	if bc.extra != nil {
		fmt.Fprintf(h, "dockerfile\x00%d\x00", len(bc.extra))
		h.Write(bc.extra)
	}
	for _, e := range bc.entries {
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00%s\x00", e.name, e.mode, e.size, e.link)
		if e.mode.IsRegular() {
			if err := hashFile(h, bc.root, e); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(w io.Writer, root *os.Root, e contextEntry) error {
	f, err := confine.OpenRegular(root, e.name)
	if err != nil {
		return fmt.Errorf("read the build context: %w", err)
	}
	defer f.Close()
	fh := sha256.New()
	if _, err := io.Copy(fh, f); err != nil {
		return fmt.Errorf("read the build context: %s: %w", e.name, err)
	}
	w.Write(fh.Sum(nil))
	return nil
}

// writeTar writes the context, read from root (the same directory as
// bc.root), as the tar archive the engine's build takes. Owners are root,
// as the docker CLI sends them. The first entry is a plain ustar one
// where its name allows (its time rounded to the second): BuildKit takes
// an upload for a tar only when its first 512 bytes read as a tar header,
// and a PAX record before it does not.
func (bc *buildContext) writeTar(w io.Writer, root *os.Root) error {
	tw := tar.NewWriter(w)
	for i, e := range bc.entries {
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    int64(e.mode.Perm()),
			ModTime: e.mtime,
			Format:  tar.FormatPAX,
		}
		if i == 0 {
			hdr.Format = tar.FormatUnknown
		}
		if e.mode&fs.ModeSetuid != 0 {
			hdr.Mode |= 0o4000
		}
		if e.mode&fs.ModeSetgid != 0 {
			hdr.Mode |= 0o2000
		}
		if e.mode&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		switch {
		case e.mode.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.name+"/"
		case e.mode&fs.ModeSymlink != 0:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if err := copyEntry(tw, root, e); err != nil {
				return err
			}
		}
	}
	if bc.extra != nil {
		hdr := &tar.Header{Name: bc.dockerfile, Mode: 0o644, Size: int64(len(bc.extra)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(bc.extra); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyEntry(w io.Writer, root *os.Root, e contextEntry) error {
	f, err := confine.OpenRegular(root, e.name)
	if err != nil {
		return fmt.Errorf("read the build context: %w", err)
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, e.size))
	if err == nil && n != e.size {
		err = fmt.Errorf("%s changed while it was sent; try again", e.name)
	}
	if err != nil {
		return fmt.Errorf("read the build context: %w", err)
	}
	return nil
}

// readContextFile reads the regular file name of a context, at most max
// bytes of it.
func readContextFile(root *os.Root, name string, max int64) ([]byte, error) {
	f, err := confine.OpenRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// contextFileName is the name a Dockerfile from outside the context gets
// inside the archive.
func contextFileName(df []byte) string {
	sum := sha256.Sum256(df)
	return ".shiro-dockerfile-" + hex.EncodeToString(sum[:])[:12]
}

// cleanRel reports whether p, a slash path relative to a root, stays inside
// it.
func cleanRel(p string) (string, bool) {
	p = path.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") || path.IsAbs(p) {
		return p, false
	}
	return p, true
}
