package orchestrator

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shiroagent/shiro/internal/workspace"
)

// tree builds files under dir: a name ending in "/" is a directory, a
// value "-> target" a symlink, "fifo" a FIFO, anything else a file's
// content.
func tree(t *testing.T, dir string, entries map[string]string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		v := entries[name]
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(v, "-> "):
			err = os.Symlink(strings.TrimPrefix(v, "-> "), p)
		case v == "fifo":
			err = syscall.Mkfifo(p, 0o644)
		default:
			err = os.WriteFile(p, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// inside keeps the instructions found under base: a test cannot control
// the machine's directories above its temporary one.
func inside(set InstructionSet, base string) []Instruction {
	var out []Instruction
	for _, f := range set.Files {
		if !filepath.IsAbs(f.Path) || strings.HasPrefix(f.Path, base+string(filepath.Separator)) {
			out = append(out, f)
		}
	}
	return out
}

func TestLoadInstructions(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 50000)
	tests := []struct {
		name    string
		entries map[string]string // under base; the repository is repo/, the workspace repo/sub
		want    []Instruction     // paths as shown
	}{
		{
			name:    "none",
			entries: map[string]string{"repo/.git/HEAD": "ref: refs/heads/main\n", "repo/sub/": ""},
		},
		{
			name: "outermost first from the git root, nothing above it, in file order",
			entries: map[string]string{
				"AGENTS.md":          "ABOVE THE ROOT",
				"repo/.git/HEAD":     "ref: refs/heads/main\n",
				"repo/AGENTS.md":     " root agents \n",
				"repo/sub/.shiro.md": "sub shiro",
				"repo/sub/CLAUDE.md": "sub claude",
				"repo/sub/AGENTS.md": "\n\n",
			},
			want: []Instruction{{Path: "@/repo/AGENTS.md", Text: "root agents"}, {Path: "CLAUDE.md", Text: "sub claude"}, {Path: ".shiro.md", Text: "sub shiro"}},
		},
		{
			name:    "a long file is cut at 12,000 characters",
			entries: map[string]string{"repo/.git/HEAD": "x", "repo/sub/AGENTS.md": long},
			want:    []Instruction{{Path: "AGENTS.md", Text: long[:2*maxInstructionChars]}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			tree(t, base, tt.entries)
			set := loadInstructions(t, filepath.Join(base, "repo", "sub"))
			for i := range tt.want {
				tt.want[i].Path = strings.Replace(tt.want[i].Path, "@", base, 1)
			}
			if got := inside(set, base); !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
			if len(set.Notices) != 0 {
				t.Errorf("notices %q", set.Notices)
			}
		})
	}
}

func TestLoadInstructionsRefusesWhatLeavesTheRepository(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-MARKER-7f3a"
	tests := []struct {
		name    string
		entries map[string]string // under base: the repository is repo/, the workspace repo/sub, outside/ holds secrets
		want    []Instruction
		notices []string
	}{
		{
			name:    "a symlink to /proc/self/environ",
			entries: map[string]string{"repo/sub/AGENTS.md": "-> /proc/self/environ"},
			notices: []string{"AGENTS.md is a symlink that leaves the repository; not read"},
		},
		{
			name:    "a symlink to a secret outside",
			entries: map[string]string{"repo/sub/CLAUDE.md": "-> ../../outside/id_rsa"},
			notices: []string{"CLAUDE.md is a symlink that leaves the repository; not read"},
		},
		{
			name:    "a chain that ends outside",
			entries: map[string]string{"repo/sub/.shiro.md": "-> hop", "repo/sub/hop": "-> ../../outside/id_rsa"},
			notices: []string{".shiro.md is a symlink that leaves the repository; not read"},
		},
		{
			name:    "a FIFO",
			entries: map[string]string{"repo/sub/AGENTS.md": "fifo"},
			notices: []string{"AGENTS.md is a FIFO; not read"},
		},
		{
			name:    "a directory",
			entries: map[string]string{"repo/sub/AGENTS.md/": ""},
			notices: []string{"AGENTS.md is a directory; not read"},
		},
		{
			name:    "a symlink above the workspace, in the repository",
			entries: map[string]string{"repo/sub/": "", "repo/AGENTS.md": "-> ../outside/id_rsa"},
			notices: []string{"@/repo/AGENTS.md is a symlink that leaves the repository; not read"},
		},
		{
			name:    "a symlinked directory on the way",
			entries: map[string]string{"repo/sub/": "", "repo/sub/CLAUDE.md": "-> ../link/id_rsa", "repo/link": "-> ../outside"},
			notices: []string{"CLAUDE.md is a symlink that leaves the repository; not read"},
		},
		{
			name:    "a symlink that stays in the repository is followed",
			entries: map[string]string{"repo/docs/agents.md": "shared rules", "repo/sub/CLAUDE.md": "-> ../docs/agents.md"},
			want:    []Instruction{{Path: "CLAUDE.md", Text: "shared rules"}},
		},
		{
			name:    "an absolute symlink is not followed, even inside",
			entries: map[string]string{"repo/docs/agents.md": "shared rules", "repo/sub/CLAUDE.md": "-> @/repo/docs/agents.md"},
			notices: []string{"CLAUDE.md is an absolute symlink (only relative links that stay inside the repository are followed); not read"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			entries := map[string]string{"repo/.git/HEAD": "ref: refs/heads/main\n", "outside/id_rsa": secret}
			for k, v := range tt.entries {
				entries[k] = strings.Replace(v, "@", base, 1)
			}
			tree(t, base, entries)
			set := loadInstructions(t, filepath.Join(base, "repo", "sub"))
			if got := inside(set, base); !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
			for i := range tt.notices {
				tt.notices[i] = strings.Replace(tt.notices[i], "@", base, 1)
			}
			if !slices.Equal(set.Notices, tt.notices) {
				t.Errorf("notices %q\nwant %q", set.Notices, tt.notices)
			}
			block := InstructionsBlock(set.Files)
			if strings.Contains(block, secret) || strings.Contains(block, "PATH=") {
				t.Errorf("a secret reached the prompt:\n%s", block)
			}
		})
	}
}

func TestLoadInstructionsOutsideARepository(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	tree(t, base, map[string]string{
		"outside/id_rsa":       "SECRET",
		"up/AGENTS.md":         "above the workspace",
		"up/CLAUDE.md":         "-> ../outside/id_rsa",
		"up/ws/AGENTS.md":      "-> ../AGENTS.md",
		"up/ws/CLAUDE.md":      "-> docs/claude.md",
		"up/ws/docs/c.txt":     "",
		"up/ws/docs/claude.md": "workspace rules",
	})
	set := loadInstructions(t, filepath.Join(base, "up", "ws"))
	want := []Instruction{{Path: filepath.Join(base, "up", "AGENTS.md"), Text: "above the workspace"}, {Path: "CLAUDE.md", Text: "workspace rules"}}
	if got := inside(set, base); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	wantNotices := []string{
		filepath.Join(base, "up", "CLAUDE.md") + " is a symlink that leaves its directory; not read",
		"AGENTS.md is a symlink that leaves the workspace; not read",
	}
	if !slices.Equal(set.Notices, wantNotices) {
		t.Errorf("notices %q\nwant %q", set.Notices, wantNotices)
	}
}

// loadInstructions loads the instruction files of the workspace dir,
// opened as a run opens it.
func loadInstructions(t *testing.T, dir string) InstructionSet {
	t.Helper()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	return LoadInstructions(ws)
}
