package orchestrator

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// InstructionFiles are read in each directory, in this order.
var InstructionFiles = []string{"AGENTS.md", "CLAUDE.md", ".shiro.md"}

// maxInstructionChars caps each instruction file.
const maxInstructionChars = 12000

// Instruction is one loaded instruction file.
type Instruction struct {
	Path string // relative to the workspace when inside it, else absolute
	Text string
}

// LoadInstructions reads the project instructions from the git root (the
// first ancestor with .git/HEAD; the filesystem root when there is none)
// down to the workspace, outermost first. Nothing above the git root is
// read. Empty files are skipped; each is capped at 12,000 characters.
func LoadInstructions(workspace string) []Instruction {
	dirs := []string{}
	for d := workspace; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if _, err := os.Stat(filepath.Join(d, ".git", "HEAD")); err == nil {
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	var out []Instruction
	for i := len(dirs) - 1; i >= 0; i-- {
		for _, name := range InstructionFiles {
			p := filepath.Join(dirs[i], name)
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			text := strings.TrimSpace(string(b))
			if text == "" {
				continue
			}
			if utf8.RuneCountInString(text) > maxInstructionChars {
				text = string([]rune(text)[:maxInstructionChars])
			}
			shown := p
			if rel, err := filepath.Rel(workspace, p); err == nil && !strings.HasPrefix(rel, "..") {
				shown = rel
			}
			out = append(out, Instruction{Path: shown, Text: text})
		}
	}
	return out
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
