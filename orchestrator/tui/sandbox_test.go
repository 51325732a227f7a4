package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/sandbox"
)

func TestSandboxStateInTheHeader(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	f.m.box = sandboxBox{image: "shiro-sandbox:test", phase: "starting"}
	if v := f.view(); !strings.Contains(v, "sandbox: shiro-sandbox:test - starting...") || !strings.Contains(v, "sandbox starting") {
		t.Errorf("starting:\n%s", v)
	}
	// Progress arrives as the sandbox writes it; the header shows lines.
	f.app.Events(orchestrator.ProgressEvent{Text: "building the sandbox image shiro-sandbox:test (once)\nStep 2/5 : RUN apt-get"})
	f.send(<-f.app.pump)
	if v := f.view(); !strings.Contains(v, "building the image shiro-sandbox:test: building the sandbox image") {
		t.Errorf("building:\n%s", v)
	}
	f.app.Events(orchestrator.ProgressEvent{Text: " install\r"})
	f.send(<-f.app.pump)
	if v := f.view(); !strings.Contains(v, "Step 2/5 : RUN apt-get install") {
		t.Errorf("a line is sent once complete:\n%s", v)
	}
	f.send(sandboxMsg{err: errors.New("cannot reach the Docker engine")})
	v := f.view()
	for _, want := range []string{"sandbox: failed - cannot reach the Docker engine", "fix: start Docker", "sandbox failed"} {
		if !strings.Contains(v, want) {
			t.Errorf("failed state lacks %q:\n%s", want, v)
		}
	}
	// An error that names its fix (an unreachable engine says why) has it
	// shown instead of "start Docker".
	f.send(sandboxMsg{err: fmt.Errorf("open: %w", fixedError{"add your user to the group docker"})})
	if v := f.view(); !strings.Contains(v, "fix: add your user to the group docker") || strings.Contains(v, "start Docker") {
		t.Errorf("the error's own fix is not shown:\n%s", v)
	}
	// Once the transcript has begun, the failure is printed too.
	f.m.printInfo("x")
	f.send(sandboxMsg{err: errors.New("gone again")})
	if !strings.Contains(f.printed(), "error: the sandbox did not start: gone again") {
		t.Errorf("printed:\n%s", f.printed())
	}
}

func TestOnboardingAnswersAreSaved(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100, func(o *Options) { o.Configured = false })
	cfg := config.Config{Provider: config.ProviderOpenAICompatible, BaseURL: "http://localhost:11434/v1", Model: "qwen3", APIKey: "sk-local-key"}
	msg := f.m.rt.saveProvider(cfg, false)()
	set, ok := msg.(modelSetMsg)
	if !ok || set.err != nil {
		t.Fatalf("saveProvider: %#v", msg)
	}
	f.send(set)
	if !f.m.configured || f.sess.agent.Model().Info().Model != "qwen3" {
		t.Errorf("configured %v, model %q", f.m.configured, f.sess.agent.Model().Info().Model)
	}
	data, err := os.ReadFile(f.app.opts.Paths.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"provider": "openai-compatible", "baseURL": "http://localhost:11434/v1", "model": "qwen3", "apiKey": "sk-local-key"}
	for k, v := range want {
		if doc[k] != v {
			t.Errorf("config %s = %v, want %v", k, doc[k], v)
		}
	}
	if got := maskKey("sk-local-key"); got != "sk-l...-key" {
		t.Errorf("masked %q", got)
	}
}

func TestStatusLineShowsThePullAndBuildTotals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 140)
	f.m.box = sandboxBox{image: "registry.test/team/dev:1", phase: "starting"}
	f.app.Events(orchestrator.ProgressEvent{Total: &sandbox.Total{Done: 2_600_000, Of: 5_000_000}})
	f.send(<-f.app.pump)
	if got := f.m.statusView(140); !strings.Contains(got, "sandbox starting, pull 52% 2.6MB/5.0MB") {
		t.Errorf("pull total not on the status line: %q", got)
	}
	f.app.Events(orchestrator.ProgressEvent{Total: &sandbox.Total{Build: true, Done: 2, Of: 5}})
	f.send(<-f.app.pump)
	if got := f.m.statusView(140); !strings.Contains(got, "sandbox building, step 3/5") {
		t.Errorf("build total not on the status line: %q", got)
	}
	f.send(sandboxMsg{info: sandbox.Info{Kind: "docker"}})
	if got := f.m.statusView(140); strings.Contains(got, "step") || !strings.Contains(got, "sandbox ready") {
		t.Errorf("the total outlived the start: %q", got)
	}
}

func TestAMovedTagAsksAndAYesTakesTheNewImage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		keys   []tea.KeyMsg
		wanted int32
	}{
		{"yes takes it", []tea.KeyMsg{key(enter)}, 1},
		{"no keeps the image", []tea.KeyMsg{key(down), key(enter)}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 160)
			l := f.loop()
			move := sandbox.TagMove{Ref: "registry.test/team/dev:1", Old: "sha256:aaaaaaaaaaaaaaaa", New: "sha256:bbbbbbbbbbbbbbbb"}
			f.app.Events(orchestrator.ImageMovedEvent{TagMove: move})
			l.until("the question", func(m *Model) bool { return m.ask != nil })
			if v := f.view(); !strings.Contains(v, "moved on its registry") || !strings.Contains(v, "aaaaaaaaaaaa") {
				t.Errorf("the question does not say what moved:\n%s", v)
			}
			for _, k := range c.keys {
				l.key(k)
			}
			l.until("the answer", func(m *Model) bool { return m.ask == nil })
			if c.wanted == 1 {
				l.until("the new image", func(m *Model) bool { return f.sess.newImages.Load() == 1 && m.box.phase == "ready" })
			}
			l.cmds.Wait()
			if got := f.sess.newImages.Load(); got != c.wanted {
				t.Errorf("TakeNewImage ran %d times, want %d", got, c.wanted)
			}
		})
	}
}

func TestAWorktreeAgentNamesItselfAndItsBranch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 140, func(o *Options) { o.Record.Worktree, o.Record.Branch = "fix-1", "shiro/fix-1" })
	if got := f.m.headerView(); !strings.Contains(got, "worktree agent: fix-1 on branch shiro/fix-1") {
		t.Errorf("the header does not name the agent:\n%s", got)
	}
	if got := f.m.statusView(140); !strings.Contains(got, "shiro/fix-1") {
		t.Errorf("the status line does not name the branch: %q", got)
	}
	plain := newFixture(t, 140)
	if got := plain.m.headerView() + plain.m.statusView(140); strings.Contains(got, "worktree") || strings.Contains(got, "shiro/") {
		t.Errorf("a session in the checkout names a worktree: %q", got)
	}
}

// fixedError is an error that names its fix, as docker.UnreachableError.
type fixedError struct{ fix string }

func (e fixedError) Error() string   { return "permission denied on the socket" }
func (e fixedError) FixText() string { return e.fix }
