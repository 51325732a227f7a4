//go:build unix

package hostwrite

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Op is one operation of a batch that Check looks at.
type Op struct {
	Path string
	// Remove: the entry is removed. Otherwise it is written (made or
	// replaced), and the directories it needs made.
	Remove bool
}

// Check reports, without changing anything, what the operations of a
// batch would meet if they ran now: every refusal (and every other failure
// the walk finds, such as a file where a directory must be), joined, or
// nil when all would pass. An entry the batch removes does not stand in
// the way of a directory the batch makes there, and a git directory's
// shape is judged on what the directory will hold once the batch is done.
// A multi-file restore calls it before it changes anything; each
// operation is checked again when it runs.
func (g *Gate) Check(ops []Op) error {
	var errs []error
	rels := make([]string, len(ops))
	removed := map[string]bool{}
	for i, op := range ops {
		rel, err := g.clean(op.Path)
		if err == nil && rel == "." {
			err = fmt.Errorf("%s is the workspace itself", op.Path)
		}
		if err != nil {
			errs = append(errs, err)
			rels[i] = ""
			continue
		}
		rels[i] = rel
		if op.Remove {
			removed[rel] = true
		}
	}
	pb := g.newProber(removed)
	defer pb.close()
	// Probe every directory once, in path order, so that the walk opens
	// each shared ancestor once.
	var dirs []string
	for _, rel := range rels {
		if rel != "" {
			d, _ := split(rel)
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	probes := map[string]probe{}
	for _, d := range dirs {
		if _, ok := probes[d]; !ok {
			probes[d] = pb.probe(d)
		}
	}
	removes := map[string][]string{} // directory -> the entries removed from it
	// made[dir][name] are the ops that make the entry name in dir (a file
	// or a missing directory on their way).
	made := map[string]map[string][]string{}
	add := func(dir, name, rel string) {
		if _, ok := shapeName(name); !ok {
			return
		}
		if made[dir] == nil {
			made[dir] = map[string][]string{}
		}
		n, _ := shapeName(name)
		made[dir][n] = append(made[dir][n], rel)
	}
	for i, op := range ops {
		rel := rels[i]
		if rel == "" {
			continue
		}
		dir, base := split(rel)
		if IsDotGit(base) {
			errs = append(errs, dotGitEntry(rel))
			continue
		}
		pr := probes[dir]
		if pr.err != nil {
			if op.Remove && errors.Is(pr.err, unix.ENOENT) {
				continue // nothing to remove
			}
			errs = append(errs, pr.errFor(rel))
			continue
		}
		if op.Remove {
			if len(pr.missing) == 0 { // else its directory is not there: nothing to remove
				removes[dir] = append(removes[dir], base)
			}
			continue
		}
		at := pr.last
		for _, m := range pr.missing {
			add(at, m, rel)
			at = join(at, m)
		}
		add(dir, base, rel)
	}
	for _, d := range slices.Sorted(maps.Keys(removes)) {
		if pb.probe(d).err == nil {
			for _, name := range removes[d] {
				if err := g.checkEntry(pb.top(), d, name, join(d, name)); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	// The directories that would hold a HEAD beside objects and refs, or
	// beside commondir, once the batch is done.
	for _, d := range slices.Sorted(maps.Keys(made)) {
		names := made[d]
		fd := -1
		if pr := pb.probe(d); pr.err == nil && len(pr.missing) == 0 {
			fd = pb.top()
		}
		has := func(x string) bool {
			if len(names[x]) > 0 {
				return true
			}
			return fd >= 0 && exists(fd, x) && !removed[join(d, x)]
		}
		if GitDirShape(has) != "" {
			var by []string
			for _, rels := range names {
				by = append(by, rels...)
			}
			sort.Strings(by)
			for _, rel := range by {
				errs = append(errs, makesRefusal(rel, d))
			}
		}
	}
	return errors.Join(errs...)
}

// probe is what a walk to a directory found without changing anything:
// the deepest directory there now (last) and the components below it the
// batch would make (missing), or why it would fail.
type probe struct {
	last    string
	missing []string
	err     error
}

// errFor is the probe's failure for the operation on rel.
func (p probe) errFor(rel string) error {
	var r *Refusal
	if errors.As(p.err, &r) {
		return &Refusal{Path: rel, Reason: r.Reason}
	}
	return fmt.Errorf("%s: %w", rel, p.err)
}

// prober walks to the directories of a batch as walk does, without
// making anything, keeping the directories of the last path open (a
// stack as deep as the path) so that the next path opens only what it
// does not share with it.
type prober struct {
	g       *Gate
	removed map[string]bool
	rootErr error
	stack   []frame // stack[0] is the workspace
}

type frame struct {
	path string
	fd   int
}

func (g *Gate) newProber(removed map[string]bool) *prober {
	pb := &prober{g: g, removed: removed}
	fd, err := g.walk(".", ".", walkExisting)
	if err != nil {
		pb.rootErr = err
		return pb
	}
	pb.stack = []frame{{path: ".", fd: fd}}
	return pb
}

func (pb *prober) close() {
	for _, f := range pb.stack {
		unix.Close(f.fd)
	}
	pb.stack = nil
}

// top is the directory the last successful probe ended on.
func (pb *prober) top() int { return pb.stack[len(pb.stack)-1].fd }

// probe walks to dir, stopping, without making anything, where a
// component is missing or is an entry the batch removes: from there on
// the batch makes the directories. On success with nothing missing, top
// is dir.
func (pb *prober) probe(dir string) probe {
	g := pb.g
	if pb.rootErr != nil {
		return probe{err: pb.rootErr}
	}
	if dir == "." {
		pb.popTo(1)
		return probe{last: "."}
	}
	names := strings.Split(dir, "/")
	at := "."
	for _, name := range names {
		at = join(at, name)
		if IsDotGit(name) {
			return probe{err: g.dotGitAt(at, dir)}
		}
	}
	// Keep what dir shares with the path on the stack.
	keep := 1
	for keep < len(pb.stack) && keep <= len(names) && pb.stack[keep].path == strings.Join(names[:keep], "/") {
		keep++
	}
	pb.popTo(keep)
	at = pb.stack[len(pb.stack)-1].path
	for i := keep - 1; i < len(names); i++ {
		name := names[i]
		here := join(at, name)
		if pb.removed[here] {
			return probe{last: at, missing: names[i:]}
		}
		cur := pb.top()
		next, err := openDirAt(cur, name, true)
		if errors.Is(err, unix.ENOENT) {
			return probe{last: at, missing: names[i:]}
		}
		if err != nil {
			return probe{err: g.classify(cur, name, here, dir, err)}
		}
		if err := g.checkDir(next, here, dir, walkExisting); err != nil {
			unix.Close(next)
			return probe{err: err}
		}
		pb.stack = append(pb.stack, frame{path: here, fd: next})
		at = here
	}
	return probe{last: at}
}

// popTo closes the stack's directories from n on.
func (pb *prober) popTo(n int) {
	for len(pb.stack) > n {
		unix.Close(pb.top())
		pb.stack = pb.stack[:len(pb.stack)-1]
	}
}
