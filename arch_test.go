package shiro_test

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/shiroagent/shiro"

type pkg struct {
	ImportPath string
	Name       string
	Doc        string
	Imports    []string
}

// listPackages runs `go list` on the whole module.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

// sdkHomes says which packages may import each SDK (and their subpackages).
var sdkHomes = map[string][]string{
	"github.com/moby/moby/client":            {"sandbox/docker", "integration"},
	"github.com/moby/moby/api":               {"sandbox/docker", "integration"},
	"github.com/moby/term":                   {"cmd/shiro/cli"},
	"github.com/anthropics/anthropic-sdk-go": {"agent/provider/anthropic"},
	"github.com/openai/openai-go":            {"agent/provider/openai"},
	"github.com/modelcontextprotocol/go-sdk": {"tools/mcp", "integration"},
	"github.com/charmbracelet":               {"orchestrator/tui"},
	"github.com/go-git/go-git":               {"tools/gitrepo", "orchestrator/checkpoint", "sandbox/gitshadow"},
	"github.com/sergi/go-diff":               {"tools/gitrepo", "orchestrator/checkpoint"},
	"github.com/spf13/cobra":                 {"cmd/shiro/cli"},
	"mvdan.cc/sh":                            {"agent/shellcmd"},
	"github.com/elazarl/goproxy":             {"sandbox/egress"},
	"github.com/hashicorp/yamux":             {"sandbox/helper"},
	"k8s.io/":                                {"sandbox/kube", "integration"},
	"sigs.k8s.io/":                           {"sandbox/kube", "integration"},

	// The docker config's credential helpers.
	"github.com/docker/docker-credential-helpers": {"sandbox/regauth"},
}

// forbidden lists, per package prefix, the project packages it may not import
// (imports point downward only).
var forbidden = map[string][]string{
	"agent/llm":    {"agent", "tools", "sandbox", "orchestrator", "cmd", "images"},
	"agent":        {"tools", "sandbox", "orchestrator", "cmd", "images"},
	"tools":        {"agent", "orchestrator", "cmd"},
	"sandbox":      {"agent", "tools", "orchestrator", "cmd"},
	"images":       {"agent", "tools", "sandbox", "orchestrator", "cmd"},
	"orchestrator": {"cmd"},
}

func under(path, prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }

func TestImportRules(t *testing.T) {
	for _, p := range listPackages(t) {
		me := rel(p.ImportPath)
		for _, imp := range p.Imports {
			for sdk, homes := range sdkHomes {
				if !under(imp, sdk) && !strings.HasPrefix(imp, sdk) {
					continue
				}
				ok := false
				for _, h := range homes {
					if under(me, h) {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s imports %s; only %v may", me, imp, homes)
				}
			}
			if !strings.HasPrefix(imp, module) {
				continue
			}
			target := rel(imp)
			// The most specific rule for this package applies.
			best := ""
			for prefix := range forbidden {
				if under(me, prefix) && len(prefix) > len(best) {
					best = prefix
				}
			}
			for _, bad := range forbidden[best] {
				if under(target, bad) && !under(target, best) {
					t.Errorf("%s imports %s: %s may not import %s", me, target, best, bad)
				}
			}
		}
	}
}

// TestTheHelperStaysSmall: the helper binary delivered into every sandbox
// links no SDK of the host's (make bench checks its size).
func TestTheHelperStaysSmall(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./cmd/shiro-helper").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, sdk := range []string{"k8s.io/", "sigs.k8s.io/", "github.com/moby/moby", "github.com/spf13/cobra", "github.com/charmbracelet"} {
			if strings.HasPrefix(dep, sdk) {
				t.Errorf("cmd/shiro-helper depends on %s", dep)
			}
		}
	}
}

func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range listPackages(t) {
		if p.Doc == "" {
			t.Errorf("%s has no package doc comment", rel(p.ImportPath))
		}
	}
}

// TestOnlyTheOrchestratorHoldsAnAgent: a session's agent is the session's
// (issue 15). Outside agent and orchestrator (the session and the task
// subagent), no code makes or holds an *agent.Agent; front ends use
// orchestrator.Session.
func TestOnlyTheOrchestratorHoldsAnAgent(t *testing.T) {
	allowed := []string{"agent", "orchestrator", "orchestrator/sessiontools"}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .GoFiles}} {{$.Dir}}/{{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		me := rel(fields[0])
		if slices.ContainsFunc(allowed, func(a string) bool { return me == a || (a == "agent" && under(me, a)) }) {
			continue
		}
		for _, file := range fields[1:] {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"*agent.Agent", "agent.New("} {
				if bytes.Contains(src, []byte(bad)) {
					t.Errorf("%s uses %s: go through orchestrator.Session", file, bad)
				}
			}
		}
	}
}

// goFiles lists each package's production files (no tests), by import
// path relative to the module.
func goFiles(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .GoFiles}} {{$.Dir}}/{{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		files[rel(fields[0])] = fields[1:]
	}
	return files
}

// TestOneFileNamesEachBackend: a sandbox backend is one package and one
// registration (issue 27). Outside sandbox/ and integration/, at most one
// production file imports each backend package; everything else finds it
// through sandbox.Lookup.
func TestOneFileNamesEachBackend(t *testing.T) {
	files := goFiles(t)
	fset := token.NewFileSet()
	var backends []string
	for p, fs := range files {
		for _, f := range fs {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(src, []byte("\nfunc Backend() sandbox.Backend")) {
				backends = append(backends, p)
			}
		}
	}
	if len(backends) < 2 {
		t.Fatalf("found the backends %v; the test no longer finds them", backends)
	}
	importers := map[string][]string{}
	for p, fs := range files {
		if under(p, "sandbox") || under(p, "integration") {
			continue
		}
		for _, f := range fs {
			ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
				target := rel(strings.Trim(imp.Path.Value, `"`))
				if slices.Contains(backends, target) {
					importers[target] = append(importers[target], p+"/"+filepath.Base(f))
				}
			}
		}
	}
	for b, who := range importers {
		if len(who) > 1 {
			t.Errorf("%d production files outside sandbox/ import %s (at most one, the registration): %v", len(who), b, who)
		}
	}
}

// TestConfigUsesNoReflect: the configuration's keys are typed (issue 27).
func TestConfigUsesNoReflect(t *testing.T) {
	for _, p := range listPackages(t) {
		if rel(p.ImportPath) == "orchestrator/config" && slices.Contains(p.Imports, "reflect") {
			t.Error("orchestrator/config imports reflect")
		}
	}
}

// TestFewFilesOpenARoot: the workspace is opened once per run
// (internal/workspace) and handed on; outside internal/, at most three
// production files call os.OpenRoot (issue 27), each on a directory that
// is not the workspace.
func TestFewFilesOpenARoot(t *testing.T) {
	var openers []string
	for p, fs := range goFiles(t) {
		if under(p, "internal") {
			continue
		}
		for _, f := range fs {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(src, []byte("os.OpenRoot(")) {
				openers = append(openers, p+"/"+filepath.Base(f))
			}
		}
	}
	if len(openers) > 3 {
		slices.Sort(openers)
		t.Errorf("%d production files outside internal/ call os.OpenRoot (at most three; take the run's workspace.Workspace): %v", len(openers), openers)
	}
}
