package orchestrator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/internal/workspace"
)

// InstructionFiles are read in each directory, in this order.
var InstructionFiles = []string{"AGENTS.md", "CLAUDE.md", ".shiro.md"}

const (
	// maxInstructionChars caps each instruction file.
	maxInstructionChars = 12000
	// maxInstructionRead bounds what is read of a file before it is
	// trimmed and cut to maxInstructionChars.
	maxInstructionRead = 1 << 20
)

// Instruction is one loaded instruction file.
type Instruction struct {
	Path string // relative to the workspace when inside it, else absolute
	Text string
}

// InstructionSet is what LoadInstructions found: the files it read, and a
// notice for each file it refused or could not read.
type InstructionSet struct {
	Files   []Instruction
	Notices []string
}

// Names are the paths of the files read, in order.
func (s InstructionSet) Names() []string {
	names := make([]string, len(s.Files))
	for i, f := range s.Files {
		names[i] = f.Path
	}
	return names
}

// LoadInstructions reads the project instructions from the git root (the
// first ancestor with .git/HEAD; the filesystem root when there is none)
// down to the workspace, outermost first. Nothing above the git root is
// read. Empty files are skipped; each is capped at 12,000 characters.
//
// Every read is confined: in a repository, to the repository's top
// directory (a symlink may lead anywhere inside it, as CLAUDE.md ->
// AGENTS.md does); outside one, the workspace's files to the workspace and
// each directory above it to that directory. A symlink that leaves its
// boundary, a FIFO, a device or a directory is not read, and a notice
// names it and says why.
func LoadInstructions(ws *workspace.Workspace) InstructionSet {
	workspace := ws.Path()
	dirs := []string{}
	top := ""
	for d := workspace; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if _, err := os.Stat(filepath.Join(d, ".git", "HEAD")); err == nil {
			top = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	// The workspace is read through the run's open of it; a repository's
	// top or a directory above it is another directory, opened here.
	open := func(dir, name string) (confine.Tree, func(), error) {
		if dir == workspace {
			return confine.Tree{Root: ws.Root(), Name: name}, func() {}, nil
		}
		t, err := confine.Open(dir, name)
		if err != nil {
			return confine.Tree{}, nil, err
		}
		return t, func() { t.Root.Close() }, nil
	}
	var set InstructionSet
	var repo *confine.Tree
	if top != "" {
		t, done, err := open(top, "the repository")
		if err != nil {
			set.Notices = append(set.Notices, fmt.Sprintf("instruction files not read: %v", err))
			return set
		}
		defer done()
		repo = &t
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		tree, base := repo, dirs[i]
		done := func() {}
		if repo != nil {
			base = top
		} else {
			name := "its directory"
			if dirs[i] == workspace {
				name = "the workspace"
			}
			t, d, err := open(dirs[i], name)
			if err != nil {
				continue // an unreadable directory above the workspace
			}
			tree, done = &t, d
		}
		set.readDir(tree, base, dirs[i], workspace)
		done()
	}
	return set
}

// readDir reads the instruction files of dir through tree, whose top is
// base.
func (s *InstructionSet) readDir(tree *confine.Tree, base, dir, workspace string) {
	for _, name := range InstructionFiles {
		p := filepath.Join(dir, name)
		shown := p
		if rel, err := filepath.Rel(workspace, p); err == nil && filepath.IsLocal(rel) {
			shown = rel
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			continue
		}
		b, err := tree.ReadFile(filepath.ToSlash(rel), maxInstructionRead)
		if r, ok := confine.AsRefusal(err); ok {
			r.Path = shown
			s.Notices = append(s.Notices, r.Error())
			continue
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			s.Notices = append(s.Notices, fmt.Sprintf("%s could not be read: %v", shown, unwrapPath(err)))
			continue
		}
		text := strings.TrimSpace(string(b))
		if text == "" {
			continue
		}
		if utf8.RuneCountInString(text) > maxInstructionChars {
			text = string([]rune(text)[:maxInstructionChars])
		}
		s.Files = append(s.Files, Instruction{Path: shown, Text: text})
	}
}

// unwrapPath drops the path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// InstructionsBlock renders loaded instructions for the system prompt.
func InstructionsBlock(ins []Instruction) string {
	if len(ins) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Project instructions follow. Treat them as standing orders from the user: they override your defaults, but not the safety rules above.\n")
	for _, in := range ins {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", in.Path, in.Text)
	}
	return strings.TrimRight(b.String(), "\n")
}

// InitPrompt is the turn /init runs: the model studies the project and
// writes AGENTS.md with its ordinary tools (so the write asks, as any).
const InitPrompt = `Write an AGENTS.md file at the root of this project for coding agents who will work on it.

First investigate: read the manifest and build files (go.mod, package.json, Cargo.toml, pyproject.toml, Makefile, ...), the configuration, the entry points and a few representative source files; run commands if you need to confirm how to build or test.

Then write AGENTS.md, under about 100 lines, with only facts you verified:
- what the project is, in one or two sentences;
- the exact commands to install dependencies, build, run the tests (all and one), typecheck and lint;
- the layout: the main directories and what lives in each;
- the conventions the code follows (naming, errors, tests, formatting);
- traps: anything surprising a newcomer would get wrong.
If AGENTS.md already exists, improve it rather than starting over. Reply with a short summary of what you wrote.`
