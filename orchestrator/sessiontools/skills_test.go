package sessiontools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
	skills := LoadSkills(DefaultSkillSources("", ""))
	var names []string
	for _, s := range skills {
		names = append(names, s.Name)
		if s.Origin != OriginBuiltin || s.Body == "" || s.Description == "" {
			t.Errorf("skill %+v", s)
		}
	}
	if strings.Join(names, ",") != "commit,review,verify" {
		t.Errorf("built-in skills %v", names)
	}
}

func TestSkillPrecedenceProjectOverUserOverBuiltin(t *testing.T) {
	t.Parallel()
	user, project := t.TempDir(), t.TempDir()
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
	skills := LoadSkills(DefaultSkillSources(user, project))
	got := map[string]Skill{}
	for _, s := range skills {
		got[s.Name] = s
	}
	if len(skills) != 4 || skills[0].Name != "commit" || skills[1].Name != "deploy" {
		t.Fatalf("skills %+v", skills)
	}
	if got["review"].Origin != OriginUser || got["deploy"].Origin != OriginProject || got["deploy"].Body != "project deploy body" || got["commit"].Origin != OriginBuiltin {
		t.Errorf("precedence wrong: %+v", got)
	}
	// A missing directory is skipped.
	if n := len(LoadSkills(DefaultSkillSources(filepath.Join(user, "nope"), ""))); n != 3 {
		t.Errorf("%d skills with a missing user dir", n)
	}
}

func TestSkillToolAndCatalogue(t *testing.T) {
	t.Parallel()
	skills := LoadSkills([]SkillSource{{FS: fstest.MapFS{
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
