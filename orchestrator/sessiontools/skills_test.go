package sessiontools

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
)

func TestParseSkill(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text string
		ok         bool
		want       Skill
	}{
		{"plain", "---\nname: Deploy\ndescription: ship it\n---\n\n  do this  \n", true, Skill{Name: "deploy", Description: "ship it", Body: "do this"}},
		{"quoted values, odd key case, CRLF", "---\r\nNAME: \"lint\"\r\nDescription: 'run linters'\r\n---\r\nbody\r\n", true, Skill{Name: "lint", Description: "run linters", Body: "body"}},
		{"no description", "---\nname: x\n---\nbody", false, Skill{}},
		{"no front matter", "# just markdown\n", false, Skill{}},
		{"unterminated front matter", "---\nname: x\ndescription: y\nbody", false, Skill{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseSkill(c.text)
			if ok != c.ok || got != c.want {
				t.Errorf("got %+v %v, want %+v %v", got, ok, c.want, c.ok)
			}
		})
	}
	long, ok := ParseSkill("---\nname: long\ndescription: d\n---\n" + strings.Repeat("x", MaxSkillBody+10))
	if !ok || len(long.Body) != MaxSkillBody {
		t.Errorf("body not cut: %d", len(long.Body))
	}
}

func TestBuiltinSkills(t *testing.T) {
	t.Parallel()
	skills, notices := LoadSkills(DefaultSkillSources("", nil))
	if len(notices) != 0 {
		t.Errorf("notices %q", notices)
	}
	var names []string
	for _, s := range skills {
		names = append(names, s.Name)
		if s.Origin != OriginBuiltin || s.Body == "" || s.Description == "" {
			t.Errorf("skill %+v", s)
		}
	}
	if strings.Join(names, ",") != "commit,debug,refactor,review,test,verify" {
		t.Errorf("built-in skills %v", names)
	}
}

func TestSkillPrecedenceProjectOverUserOverBuiltin(t *testing.T) {
	t.Parallel()
	user, ws := t.TempDir(), t.TempDir()
	project := filepath.Join(ws, ".shiro", "skills")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(dir, file, text string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(user, "review.md", "---\nname: review\ndescription: user review\n---\nuser body")
	write(user, "deploy.md", "---\nname: deploy\ndescription: user deploy\n---\nuser deploy body")
	write(user, "notes.txt", "---\nname: ignored\ndescription: not md\n---\n")
	write(project, "d.md", "---\nname: Deploy\ndescription: project deploy\n---\nproject deploy body")
	write(project, "broken.md", "no front matter")
	skills, notices := LoadSkills(DefaultSkillSources(user, openRoot(t, ws)))
	if len(notices) != 0 {
		t.Errorf("notices %q", notices)
	}
	got := map[string]Skill{}
	for _, s := range skills {
		got[s.Name] = s
	}
	if len(skills) != 7 || skills[0].Name != "commit" || skills[1].Name != "debug" || skills[2].Name != "deploy" {
		t.Fatalf("skills %+v", skills)
	}
	if got["review"].Origin != OriginUser || got["deploy"].Origin != OriginProject || got["deploy"].Body != "project deploy body" || got["commit"].Origin != OriginBuiltin {
		t.Errorf("precedence wrong: %+v", got)
	}
	// A missing directory is skipped.
	if skills, notices := LoadSkills(DefaultSkillSources(filepath.Join(user, "nope"), openRoot(t, t.TempDir()))); len(skills) != 6 || len(notices) != 0 {
		t.Errorf("%d skills, notices %q with missing directories", len(skills), notices)
	}
}

func TestSkillToolAndCatalogue(t *testing.T) {
	t.Parallel()
	skills, _ := LoadSkills([]SkillSource{{FS: fstest.MapFS{
		"a.md": {Data: []byte("---\nname: alpha\ndescription: first skill\n---\nALPHA BODY")},
		"b.md": {Data: []byte("---\nname: beta\ndescription: second skill\n---\nBETA BODY")},
	}, Origin: OriginProject}})
	cat := SkillsCatalogue(skills)
	if !strings.Contains(cat, "- alpha: first skill\n- beta: second skill") || strings.Contains(cat, "BODY") {
		t.Errorf("catalogue %q", cat)
	}
	if SkillsCatalogue(nil) != "" {
		t.Error("no skills renders a catalogue")
	}
	tool := SkillTool{Skills: skills}
	res, _ := tool.Run(t.Context(), json.RawMessage(`{"name":"  Beta "}`), nil)
	if res.IsError || res.Output != "Skill \"beta\" (project). Follow these instructions for this task.\n\nBETA BODY" {
		t.Errorf("skill result %q", res.Output)
	}
	res, _ = tool.Run(t.Context(), json.RawMessage(`{"name":"gamma"}`), nil)
	if !res.IsError || res.Output != `No skill named "gamma". Available: alpha, beta` {
		t.Errorf("unknown skill %q", res.Output)
	}
}

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func TestProjectSkillsStayInTheWorkspace(t *testing.T) {
	t.Parallel()
	const skill = "---\nname: %s\ndescription: %s\n---\nbody of %s"
	stolen := fmt.Sprintf(skill, "stolen", "SECRET-DESCRIPTION", "SECRET-BODY")
	tests := []struct {
		name string
		// plant builds the hostile entry in an empty workspace; outside
		// is a directory beside it holding stolen.md, a valid skill.
		plant  func(t *testing.T, ws, outside string)
		skill  string // the project skill expected, "" for none
		notice string
	}{
		{
			name: "a symlink to a skill outside",
			plant: func(t *testing.T, ws, outside string) {
				symlink(t, filepath.Join(outside, "stolen.md"), ws, ".shiro/skills/s.md")
			},
			notice: ".shiro/skills/s.md is a symlink that leaves the workspace; not read",
		},
		{
			name:   "a symlink to /proc/self/environ",
			plant:  func(t *testing.T, ws, _ string) { symlink(t, "/proc/self/environ", ws, ".shiro/skills/env.md") },
			notice: ".shiro/skills/env.md is a symlink that leaves the workspace; not read",
		},
		{
			name: "a FIFO",
			plant: func(t *testing.T, ws, _ string) {
				if err := os.MkdirAll(filepath.Join(ws, ".shiro/skills"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(filepath.Join(ws, ".shiro/skills/fifo.md"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			notice: ".shiro/skills/fifo.md is a FIFO; not read",
		},
		{
			name: "a chain that ends outside",
			plant: func(t *testing.T, ws, outside string) {
				symlink(t, "../../hop.md", ws, ".shiro/skills/chain.md")
				symlink(t, filepath.Join(outside, "stolen.md"), ws, "hop.md")
			},
			notice: ".shiro/skills/chain.md is a symlink that leaves the workspace; not read",
		},
		{
			name:   "the skills directory symlinked outside",
			plant:  func(t *testing.T, ws, outside string) { symlink(t, outside, ws, ".shiro/skills") },
			notice: ".shiro/skills is a symlink that leaves the workspace; not read",
		},
		{
			name: ".shiro symlinked outside",
			plant: func(t *testing.T, ws, outside string) {
				if err := os.MkdirAll(filepath.Join(outside, "skills"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(outside, "stolen.md"), filepath.Join(outside, "skills", "stolen.md")); err != nil {
					t.Fatal(err)
				}
				symlink(t, outside, ws, ".shiro")
			},
			notice: ".shiro/skills is behind a symlink that leaves the workspace; not read",
		},
		{
			name: "a symlink that stays inside is followed",
			plant: func(t *testing.T, ws, _ string) {
				if err := os.WriteFile(filepath.Join(ws, "docs.md"), fmt.Appendf(nil, skill, "docs", "inside", "docs"), 0o644); err != nil {
					t.Fatal(err)
				}
				symlink(t, "../../docs.md", ws, ".shiro/skills/docs.md")
			},
			skill: "docs",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws, outside := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "stolen.md"), []byte(stolen), 0o644); err != nil {
				t.Fatal(err)
			}
			tt.plant(t, ws, outside)
			skills, notices := LoadSkills(DefaultSkillSources("", openRoot(t, ws)))
			var project []string
			for _, s := range skills {
				if strings.Contains(s.Description+s.Body, "SECRET") {
					t.Errorf("a secret was read: %+v", s)
				}
				if s.Origin == OriginProject {
					project = append(project, s.Name)
				}
			}
			if want := []string{tt.skill}; tt.skill != "" && !slices.Equal(project, want) || tt.skill == "" && len(project) != 0 {
				t.Errorf("project skills %q, want %q", project, tt.skill)
			}
			var want []string
			if tt.notice != "" {
				want = []string{tt.notice}
			}
			if !slices.Equal(notices, want) {
				t.Errorf("notices %q, want %q", notices, want)
			}
		})
	}
}

// symlink makes ws/name (creating its directory) point at target.
func symlink(t *testing.T, target, ws, name string) {
	t.Helper()
	p := filepath.Join(ws, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
