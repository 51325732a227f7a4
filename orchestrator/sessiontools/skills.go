package sessiontools

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/tools"
)

// MaxSkillBody is where a skill's body is cut, in characters.
const MaxSkillBody = 20_000

// maxSkillFile bounds what is read of a project's skill file.
const maxSkillFile = 1 << 20

// ProjectSkillsDir is where a workspace keeps its skills.
const ProjectSkillsDir = ".shiro/skills"

// Skill origins, in precedence order (a later one overrides an earlier
// skill of the same name).
const (
	OriginBuiltin = "builtin"
	OriginUser    = "user"
	OriginProject = "project"
)

// Skill is a named set of instructions loaded on demand.
type Skill struct {
	Name        string
	Description string
	Body        string
	Origin      string
}

//go:embed skills/*.md
var builtinSkills embed.FS

// SkillSource is a directory of skill files and the origin it gives them.
type SkillSource struct {
	FS     fs.FS
	Origin string
}

// DefaultSkillSources are the built-in skills, then userDir ("" for
// none), then the workspace's ProjectSkillsDir (nil for none). The
// project's files are read through the workspace root: a skill file (or
// the directory) that is a symlink out of the workspace, or that is not a
// regular file, is refused.
func DefaultSkillSources(userDir string, workspace *os.Root) []SkillSource {
	sub, _ := fs.Sub(builtinSkills, "skills") // a constant path: cannot fail
	srcs := []SkillSource{{FS: sub, Origin: OriginBuiltin}}
	if userDir != "" {
		srcs = append(srcs, SkillSource{FS: os.DirFS(userDir), Origin: OriginUser})
	}
	if workspace != nil {
		tree := confine.Tree{Root: workspace, Name: "the workspace"}
		srcs = append(srcs, SkillSource{FS: tree.FS(ProjectSkillsDir, maxSkillFile), Origin: OriginProject})
	}
	return srcs
}

// LoadSkills reads the *.md files of each source in turn, in sorted order;
// a later skill replaces an earlier one of the same name. Files without
// valid front matter and unreadable or missing directories are skipped;
// files a source refuses (see DefaultSkillSources) are skipped with a
// notice naming them. The skills are sorted by name.
func LoadSkills(sources []SkillSource) (skills []Skill, notices []string) {
	byName := map[string]Skill{}
	refused := func(err error) bool {
		if r, ok := confine.AsRefusal(err); ok {
			notices = append(notices, r.Error())
			return true
		}
		return false
	}
	for _, src := range sources {
		ents, err := fs.ReadDir(src.FS, ".")
		if err != nil {
			refused(err)
			continue
		}
		for _, e := range ents {
			name := e.Name()
			if !strings.HasSuffix(name, ".md") {
				continue
			}
			b, err := fs.ReadFile(src.FS, name)
			if err != nil {
				refused(err)
				continue
			}
			if s, ok := ParseSkill(string(b)); ok {
				s.Origin = src.Origin
				byName[s.Name] = s
			}
		}
	}
	skills = make([]Skill, 0, len(byName))
	for _, s := range byName {
		skills = append(skills, s)
	}
	slices.SortFunc(skills, func(a, b Skill) int { return cmp.Compare(a.Name, b.Name) })
	return skills, notices
}

// ParseSkill reads a skill file: front matter between "---" lines with
// name and description (keys case-insensitive, quotes stripped), then the
// body (trimmed, cut at MaxSkillBody characters). The name is lower-cased.
func ParseSkill(text string) (Skill, bool) {
	text = strings.TrimPrefix(strings.ReplaceAll(text, "\r\n", "\n"), "\ufeff")
	rest, ok := strings.CutPrefix(strings.TrimLeft(text, " \t\n"), "---\n")
	if !ok {
		return Skill{}, false
	}
	var front, body string
	if f, b, ok := strings.Cut(rest, "\n---\n"); ok {
		front, body = f, b
	} else if f, ok := strings.CutSuffix(strings.TrimRight(rest, " \t\n"), "\n---"); ok {
		front = f
	} else {
		return Skill{}, false
	}
	var s Skill
	for line := range strings.SplitSeq(front, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "name":
			s.Name = strings.ToLower(strings.TrimSpace(v))
		case "description":
			s.Description = strings.TrimSpace(v)
		}
	}
	if s.Name == "" || s.Description == "" {
		return Skill{}, false
	}
	s.Body = strings.TrimSpace(body)
	if utf8.RuneCountInString(s.Body) > MaxSkillBody {
		s.Body = string([]rune(s.Body)[:MaxSkillBody])
	}
	return s, true
}

// SkillsCatalogue is the skills section of the system prompt: names and
// descriptions, never bodies ("" without skills).
func SkillsCatalogue(skills []Skill) string {
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Skills: instructions for kinds of task. When the task matches one, load it with the skill tool before you start and follow it:\n")
	for _, s := range skills {
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, s.Description)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

//go:embed skill.md
var skillDoc string

var skillGuidance, skillDescription = tools.SplitDoc(skillDoc)

// SkillTool is the skill tool over a loaded set of skills.
type SkillTool struct{ Skills []Skill }

var skillSchema = objectSchema([]string{"name"}, prop{name: "name", typ: "string", desc: ""})

func (SkillTool) Name() string            { return "skill" }
func (SkillTool) Description() string     { return skillDescription }
func (SkillTool) Guidance() string        { return skillGuidance }
func (SkillTool) Schema() json.RawMessage { return skillSchema }
func (SkillTool) Gated() bool             { return false }

// Run returns the body of the named skill.
func (t SkillTool) Run(_ context.Context, input json.RawMessage, _ func(string)) (agent.Result, error) {
	var p struct{ Name string }
	if err := decode(input, &p); err != nil {
		return agent.Result{Output: err.Error(), IsError: true}, nil
	}
	name := strings.ToLower(strings.TrimSpace(p.Name))
	for _, s := range t.Skills {
		if s.Name == name {
			return agent.Result{Output: fmt.Sprintf("Skill %q (%s). Follow these instructions for this task.\n\n%s", s.Name, s.Origin, s.Body)}, nil
		}
	}
	names := make([]string, len(t.Skills))
	for i, s := range t.Skills {
		names[i] = s.Name
	}
	return agent.Result{Output: fmt.Sprintf("No skill named %q. Available: %s", name, strings.Join(names, ", ")), IsError: true}, nil
}
