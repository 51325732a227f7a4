package gitrepo

import (
	"fmt"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	fdiff "github.com/go-git/go-git/v5/plumbing/format/diff"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/shiroagent/shiro/tools"
)

// ErrNoCommits is the error of a repository whose HEAD has no commit.
var ErrNoCommits = tools.ErrNoCommits

// subject is git's %s: the first paragraph of a message on one line.
func subject(msg string) string {
	para, _, _ := strings.Cut(strings.TrimLeft(msg, "\n"), "\n\n")
	return strings.Join(strings.Fields(strings.ReplaceAll(para, "\n", " ")), " ")
}

func short(h plumbing.Hash) string { return h.String()[:7] }

// Log is `git log -n<limit> --date=short --pretty=format:"%h  %ad  %an  %s"`
// limited to commits touching filter.
func (g *Repo) Log(limit int, filter string) (string, error) {
	head, err := g.r.Head()
	if err != nil {
		return "", ErrNoCommits
	}
	opts := &git.LogOptions{From: head.Hash()}
	if f := g.repoPath(filter); f != "" {
		opts.PathFilter = func(p string) bool { return under(p, f) }
	}
	it, err := g.r.Log(opts)
	if err != nil {
		return "", fmt.Errorf("git log: %w", err)
	}
	var lines []string
	err = it.ForEach(func(c *object.Commit) error {
		if len(lines) >= limit {
			return storer.ErrStop
		}
		lines = append(lines, fmt.Sprintf("%s  %s  %s  %s", short(c.Hash), c.Author.When.Format("2006-01-02"), c.Author.Name, subject(c.Message)))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("git log: %w", err)
	}
	return strings.Join(lines, "\n"), nil
}

// BadRevisionError is Show's error for a revision that does not resolve.
type BadRevisionError struct{ Rev string }

func (e *BadRevisionError) Error() string {
	return fmt.Sprintf("fatal: ambiguous argument '%s': unknown revision or path not in the working tree.", e.Rev)
}

// Show is `git show --date=short REV [-- filter]`: a commit's header and
// patch against its first parent, or REV:path's content. Revisions are
// go-git's: names, hashes, ~ and ^ (no @{...} or :/text).
func (g *Repo) Show(rev, filter string) (string, error) {
	if spec, file, ok := strings.Cut(rev, ":"); ok {
		c, err := g.commit(spec)
		if err != nil {
			return "", err
		}
		f, err := c.File(strings.TrimPrefix(file, "./"))
		if err != nil {
			return "", fmt.Errorf("fatal: path '%s' does not exist in '%s'", file, spec)
		}
		return f.Contents()
	}
	c, err := g.commit(rev)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "commit %s\n", c.Hash)
	if c.NumParents() > 1 {
		b.WriteString("Merge:")
		for _, p := range c.ParentHashes {
			b.WriteString(" " + short(p))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "Author: %s <%s>\nDate:   %s\n\n", c.Author.Name, c.Author.Email, c.Author.When.Format("2006-01-02"))
	for _, l := range strings.Split(strings.TrimRight(c.Message, "\n"), "\n") {
		if l == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString("    " + l + "\n")
	}
	if c.NumParents() > 1 {
		return b.String(), nil // git show prints no diff for a merge by default
	}
	to, err := c.Tree()
	if err != nil {
		return "", err
	}
	from := &object.Tree{}
	if c.NumParents() == 1 {
		p, err := c.Parent(0)
		if err != nil {
			return "", err
		}
		if from, err = p.Tree(); err != nil {
			return "", err
		}
	}
	changes, err := object.DiffTree(from, to)
	if err != nil {
		return "", err
	}
	f := g.repoPath(filter)
	var kept object.Changes
	for _, ch := range changes {
		name := ch.To.Name
		if name == "" {
			name = ch.From.Name
		}
		if under(name, f) {
			kept = append(kept, ch)
		}
	}
	p, err := kept.Patch()
	if err != nil {
		return "", err
	}
	if len(kept) > 0 {
		b.WriteByte('\n')
		out, err := encode(p.FilePatches(), "")
		if err != nil {
			return "", err
		}
		b.WriteString(out)
	}
	return b.String(), nil
}

// commit resolves rev to a commit (through tags).
func (g *Repo) commit(rev string) (*object.Commit, error) {
	h, err := g.r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, &BadRevisionError{Rev: rev}
	}
	if t, err := g.r.TagObject(*h); err == nil {
		c, err := t.Commit()
		if err != nil {
			return nil, &BadRevisionError{Rev: rev}
		}
		return c, nil
	}
	c, err := g.r.CommitObject(*h)
	if err != nil {
		return nil, &BadRevisionError{Rev: rev}
	}
	return c, nil
}

// Blame is `git blame --date=short -L start,end -- path` of the committed
// file at HEAD (go-git does not blame uncommitted lines, which git shows
// as "Not Committed Yet"). start and end are 1-based; 0 means the whole
// file.
func (g *Repo) Blame(file string, start, end int) (string, error) {
	c, err := g.commit("HEAD")
	if err != nil {
		return "", ErrNoCommits
	}
	p := g.repoPath(file)
	res, err := git.Blame(c, p)
	if err != nil {
		return "", fmt.Errorf("fatal: no such path '%s' in HEAD", file)
	}
	if start <= 0 {
		start = 1
	}
	if end <= 0 || end > len(res.Lines) {
		end = len(res.Lines)
	}
	if start > len(res.Lines) {
		return "", fmt.Errorf("fatal: file %s has only %d lines", file, len(res.Lines))
	}
	lines := res.Lines[start-1 : end]
	nameW, numW := 0, len(fmt.Sprint(end))
	for _, l := range lines {
		nameW = max(nameW, len([]rune(l.AuthorName)))
	}
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%s (%-*s %s %*d) %s\n", l.Hash.String()[:8], nameW, l.AuthorName, l.Date.Format("2006-01-02"), numW, start+i, l.Text)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

var _ fdiff.Patch = patch{}
