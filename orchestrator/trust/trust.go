// Package trust decides whether a workspace's project files may run code
// or widen the sandbox: its MCP servers (stdio command lines) and the image
// its configuration chooses (a reference to pull and run, a Dockerfile or
// devcontainer.json to build). These are the project's asks. Nothing asked
// happens until the user trusts the workspace: in the chat UI by a form,
// headless by --trust-project or the user's trust.paths, or by an earlier
// "trust and remember" for the same asks.
//
// Decisions are kept in the user's data directory (trust.json), keyed by
// the workspace (in a git repository: by the repository's common git
// directory, so that its worktrees share the decision) and a hash of its
// asks, which covers the files they run: when the asks change, in this
// worktree or another, the old decision no longer counts and the change
// is shown.
package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/gitshadow"
	"github.com/shiroagent/shiro/tools/mcp"
)

// Kinds of ask.
const (
	KindMCP   = "mcp"
	KindImage = "image"
)

// Ask is one thing a project asks for.
type Ask struct {
	// Kind is KindMCP or KindImage.
	Kind string `json:"kind"`
	// Name is the MCP server's name; "image" for the image.
	Name string `json:"name"`
	// What is what would run, in full: the server's command line (with its
	// cwd and env), or the image and how it is made (the Dockerfile or
	// devcontainer.json path, its base images). The hash covers it.
	What string `json:"what"`
	// Files are the workspace files the ask may run, each with a hash of
	// its content (files.go says which): the command line is not all that
	// runs. They are compared file by file (fileChanges), not hashed with
	// the rest: a file that is gone changes nothing.
	Files map[string]string `json:"files,omitempty"`
	// Note adds what the user's own settings decide (the network a build
	// gets); it is shown but not hashed: it is not the project's to change.
	Note string `json:"-"`
}

// String is the one-line description of the ask.
func (a Ask) String() string {
	s := "MCP server " + visible(a.Name) + ": " + a.What
	if a.Kind == KindImage {
		s = "image: " + a.What
	}
	if a.Note != "" {
		s += " (" + a.Note + ")"
	}
	return s
}

// Covered says which workspace files the trust of a covers, or "" when
// none: "also covers the files it may run, as they are now: a, b, 3 more".
func (a Ask) Covered() string {
	if len(a.Files) == 0 {
		return ""
	}
	files := make([]string, 0, len(a.Files))
	for f := range a.Files {
		files = append(files, f)
	}
	slices.Sort(files)
	return "also covers the workspace files it may run, as they are now: " + fileList(files)
}

// key identifies the ask across changes.
func (a Ask) key() string { return a.Kind + "\x00" + a.Name }

// ProjectAsks lists what cfg's project file asks for in workspace w (read
// through its root): each
// stdio MCP server (remote ones are never connected, so they ask nothing)
// and the image when the project chose it. Servers the user's config
// declares under the same name are the user's and ask nothing.
//
// With --no-sandbox nothing is asked: the project's servers never start on
// the host and its image is not used.
func ProjectAsks(cfg config.Config, w *workspace.Workspace) []Ask {
	var asks []Ask
	if cfg.Sandbox.NoSandbox {
		return nil
	}
	names := make([]string, 0, len(cfg.ProjectMCPServers))
	for n := range cfg.ProjectMCPServers {
		if _, mine := cfg.MCPServers[n]; !mine {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		c, err := mcp.ParseConfig(cfg.ProjectMCPServers[n])
		if err != nil || c.Command == "" {
			continue // a bad entry or a remote server: neither ever starts
		}
		asks = append(asks, Ask{Kind: KindMCP, Name: n, What: CommandLine(c), Files: mcpFiles(w, c)})
	}
	if cfg.Sandbox.ImageFromProject && cfg.Sandbox.Image != "" {
		asks = append(asks, imageAsk(cfg, w))
	}
	return asks
}

// imageAsk describes the project's image: what it names, what would be
// built from what, and the network of the build.
func imageAsk(cfg config.Config, w *workspace.Workspace) Ask {
	ws := w.Path()
	a := Ask{Kind: KindImage, Name: "image"}
	plan, err := planImage(cfg.Sandbox, w)
	var b strings.Builder
	switch {
	case plan.Kind == sandbox.KindReference:
		fmt.Fprintf(&b, "run the image %s (pulled if missing)", plan.Ref)
	case plan.Dockerfile != "" || plan.Source != "" && plan.Ref == "":
		df := plan.Dockerfile
		if df == "" {
			df = plan.Source
		}
		fmt.Fprintf(&b, "build %s", sandbox.ShownPath(ws, df))
		if plan.Kind == sandbox.KindDevcontainer && plan.Source != "" {
			fmt.Fprintf(&b, " (from %s)", sandbox.ShownPath(ws, plan.Source))
		}
		if len(plan.Bases) > 0 {
			fmt.Fprintf(&b, " FROM %s", strings.Join(plan.Bases, ", "))
		}
		a.Note = "network " + plan.BuildNetwork + "; its RUN steps run as root inside the build"
	default:
		fmt.Fprintf(&b, "run the image %s named by %s (pulled if missing)", plan.Ref, sandbox.ShownPath(ws, plan.Source))
	}
	if plan.Dockerfile != "" {
		a.Files = buildFiles(w, plan.Source, plan.Dockerfile)
	}
	if err != nil {
		if b.Len() == 0 {
			fmt.Fprintf(&b, "%s", cfg.Sandbox.Image)
		}
		fmt.Fprintf(&b, " [cannot be read: %v]", err)
	}
	a.What = visible(b.String())
	return a
}

// planImage plans the project's image on the backend the settings choose.
func planImage(s sandbox.Settings, w *workspace.Workspace) (sandbox.ImagePlan, error) {
	b, err := sandbox.Lookup(s.Backend)
	if err != nil {
		return sandbox.ImagePlan{}, err
	}
	s.ImageFromProject = true
	return b.PlanImage(w, s)
}

// visible escapes what a terminal would not show as it is (control
// characters, bidi overrides), so nothing hides in a line shown for
// approval.
func visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// CommandLine is a stdio server's command line as a shell would take it,
// with its env and cwd in front: `cd DIR && env A=1 cmd arg…`.
func CommandLine(c mcp.Config) string {
	var parts []string
	if c.Cwd != "" {
		parts = append(parts, "cd", shellQuote(c.Cwd), "&&")
	}
	if len(c.Env) > 0 {
		keys := make([]string, 0, len(c.Env))
		for k := range c.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts = append(parts, "env")
		for _, k := range keys {
			parts = append(parts, shellQuote(k+"="+c.Env[k]))
		}
	}
	parts = append(parts, shellQuote(c.Command))
	for _, a := range c.Args {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it; control
// characters are shown escaped so that nothing hides in the line.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	plain := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r > 0x7e {
			return "$" + strconv.QuoteToASCII(s) // shown, not meant to be pasted
		}
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Hash is the hash of the asks a decision is kept under (order does not
// matter; notes and files are not part of it: Covers compares the files).
func Hash(asks []Ask) string {
	sorted := slices.Clone(asks)
	for i := range sorted {
		sorted[i].Files = nil
	}
	slices.SortFunc(sorted, func(a, b Ask) int { return strings.Compare(a.key(), b.key()) })
	data, _ := json.Marshal(sorted)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Change is how the asks differ from the ones trusted before.
type Change struct {
	Added, Removed []Ask
	// Changed pairs the old ask with the new one.
	Changed [][2]Ask
	// Files are the asks whose command line is the same but whose files
	// changed or are new.
	Files []FileChange
}

// FileChange is an ask whose files differ from the trusted ones.
type FileChange struct {
	Ask Ask
	// Changed are files whose content differs; Added ones the trust did
	// not cover (new files, or a trust from before shiro covered files).
	Changed, Added []string
}

// Covers reports whether the decision e holds for asks: the same asks,
// and no file of theirs changed or new since.
func (e Entry) Covers(asks []Ask) bool {
	if e.Hash != Hash(asks) {
		return false
	}
	return len(Diff(e.Asks, asks).Files) == 0
}

// Lines describe the change, one line each.
func (c Change) Lines() []string {
	var out []string
	for _, p := range c.Changed {
		what := "MCP server " + visible(p[1].Name)
		if p[1].Kind == KindImage {
			what = "image"
		}
		out = append(out, fmt.Sprintf("changed %s: was %s, now %s", what, p[0].What, p[1].What))
	}
	for _, f := range c.Files {
		what := "MCP server " + visible(f.Ask.Name)
		if f.Ask.Kind == KindImage {
			what = "image"
		}
		if len(f.Changed) > 0 {
			out = append(out, fmt.Sprintf("changed since you trusted it: %s of %s", fileList(f.Changed), what))
		}
		if len(f.Added) > 0 {
			out = append(out, fmt.Sprintf("not covered when you trusted it: %s of %s", fileList(f.Added), what))
		}
	}
	for _, a := range c.Added {
		out = append(out, "new "+a.String())
	}
	for _, a := range c.Removed {
		out = append(out, "gone "+a.String())
	}
	return out
}

// fileList names files (at most five, then how many more), quoted when
// a name holds what a terminal would not show.
func fileList(files []string) string {
	const show = 5
	var names []string
	for i, f := range files {
		if i == show {
			names = append(names, fmt.Sprintf("%d more", len(files)-show))
			break
		}
		names = append(names, visible(f))
	}
	return strings.Join(names, ", ")
}

// Diff compares the asks trusted before with the current ones.
func Diff(before, now []Ask) Change {
	var c Change
	old := map[string]Ask{}
	for _, a := range before {
		old[a.key()] = a
	}
	for _, a := range now {
		o, ok := old[a.key()]
		switch {
		case !ok:
			c.Added = append(c.Added, a)
		case o.What != a.What:
			c.Changed = append(c.Changed, [2]Ask{o, a})
		default:
			if ch, add := fileChanges(o, a); len(ch)+len(add) > 0 {
				c.Files = append(c.Files, FileChange{Ask: a, Changed: ch, Added: add})
			}
		}
		delete(old, a.key())
	}
	for _, a := range before {
		if _, ok := old[a.key()]; ok {
			c.Removed = append(c.Removed, a)
		}
	}
	return c
}

// Withhold removes the asks from cfg: the project's servers that ask are
// dropped, and a project image is replaced by the default image.
func Withhold(cfg *config.Config, asks []Ask) {
	for _, a := range asks {
		switch a.Kind {
		case KindMCP:
			if cfg.ProjectMCPServers != nil {
				m := make(map[string]json.RawMessage, len(cfg.ProjectMCPServers))
				for k, v := range cfg.ProjectMCPServers {
					if k != a.Name {
						m[k] = v
					}
				}
				cfg.ProjectMCPServers = m
			}
		case KindImage:
			cfg.Sandbox.Image, cfg.Sandbox.ImageFromProject = "", false
		}
	}
}

// RepositoryKey is the key a decision taken in the workspace ws holds for
// when ws is in a git repository: the repository's common git directory
// (shared by all its worktrees; symlinks resolved) and the place of ws in
// its checkout. It is "" outside a repository, and for a repository
// shiro's sandbox would not use either (gitshadow.Discover refuses it).
// A gitfile names a common directory only when that directory's own
// record of the worktree points back at it, so a directory cannot claim
// a repository it is not a worktree of.
func RepositoryKey(ws string) string {
	id := Identity(ws)
	repo, err := gitshadow.Discover(id)
	if err != nil || repo == nil {
		return ""
	}
	common, err := filepath.EvalSymlinks(repo.CommonDir)
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(repo.Top, id)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	if rel == "." {
		return common
	}
	return common + "//" + filepath.ToSlash(rel)
}

// Identity is the key a workspace's decisions are kept under: its
// absolute path with symlinks resolved (a link to a trusted workspace is
// the same workspace; a different directory with the same files is not).
func Identity(ws string) string {
	abs, err := filepath.Abs(ws)
	if err != nil {
		return filepath.Clean(ws)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}
