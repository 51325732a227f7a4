package tui

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"io"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/tools"
	"github.com/shiroagent/shiro/tools/mcp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestMain(m *testing.M) {
	// huh draws with the default renderer: fix its profile too.
	lipgloss.SetColorProfile(termenv.Ascii)
	lipgloss.SetHasDarkBackground(true)
	// regexp2 (chroma's regexps, through glamour) keeps a clock goroutine
	// that stops by itself once no regexp runs for a while.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/dlclark/regexp2.runClock"))
}

// fakeSession is a Session of func fields around a real agent. Like a
// session, it publishes to events, the App's sink; send emits the turn's
// events, which reach it as TurnEvents.
type fakeSession struct {
	plainSession
	agent   *agent.Agent
	offered []orchestrator.OfferedTool
	events  func(orchestrator.Event)
	send    func(ctx context.Context, prompt string, emit func(agent.Event)) error
	start   func(ctx context.Context) (sandbox.Info, error)
	compact func(ctx context.Context) (int, int, error)

	todos         sessiontools.TodoList
	memory        *sessiontools.Memory
	skills        []sessiontools.Skill
	plugins       []agent.Plugin
	pluginErr     []string
	compactMemory func(ctx context.Context) (sessiontools.MemoryCompaction, error)
	mcp           []mcp.ServerStatus

	network []egress.Record // overrides plainSession's none
	// newImages counts TakeNewImage calls.
	newImages atomic.Int32
	// copyFiles, when set, is the sandbox's copy (copy mode): the
	// session's files by path.
	copyFiles map[string]string

	mu                    sync.Mutex
	prompts               []string
	id, variant, thinking string
}

func (s *fakeSession) Send(ctx context.Context, prompt string) error {
	s.mu.Lock()
	s.prompts = append(s.prompts, prompt)
	s.mu.Unlock()
	emit := func(e agent.Event) { s.events(orchestrator.TurnEvent{Event: e}) }
	if s.send != nil {
		return s.send(ctx, prompt, emit)
	}
	emit(agent.Event{Type: agent.EventText, Text: "ok"})
	emit(agent.Event{Type: agent.EventDone})
	return nil
}
func (s *fakeSession) Messages() []llm.Message             { return s.agent.Messages() }
func (s *fakeSession) Model() llm.Model                    { return s.agent.Model() }
func (s *fakeSession) SetModel(m llm.Model)                { s.agent.SetModel(m) }
func (s *fakeSession) ContextTokens() int                  { return s.agent.ContextTokens() }
func (s *fakeSession) MeasureOverhead()                    { s.agent.MeasureOverhead() }
func (s *fakeSession) InterruptTools() []string            { return s.agent.InterruptTools() }
func (s *fakeSession) Allowed(n string) bool               { return s.agent.Allowed(n) }
func (s *fakeSession) AllowedPrefixes(n string) [][]string { return s.agent.AllowedPrefixes(n) }
func (s *fakeSession) Unsend(text string) bool             { return s.agent.Unsend(text) }
func (s *fakeSession) Save() (string, error)               { return "", nil }
func (s *fakeSession) Resume(q string) (store.Record, error) {
	return store.Record{}, errors.New("no session matches")
}
func (s *fakeSession) Saved() orchestrator.Saved {
	s.mu.Lock()
	defer s.mu.Unlock()
	return orchestrator.Saved{ID: cmp.Or(s.id, "0192f3a4-0000-7000-8000-000000000000"), Messages: len(s.agent.Messages())}
}
func (s *fakeSession) Clear() (string, error) {
	s.agent.Replace(nil)
	s.todos.Set(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id = "0192f3a4-0000-7000-8000-000000000001"
	return s.id, nil
}
func (s *fakeSession) Usage() orchestrator.Usage {
	u := s.agent.Usage()
	usd, _ := orchestrator.Cost(s.agent.Model().Info().Model, u)
	return orchestrator.Usage{Usage: u, CostUSD: usd}
}
func (s *fakeSession) Variant() agent.Variant {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, _ := agent.ResolveVariant(s.variant, s.thinking)
	return v
}
func (s *fakeSession) SetVariant(name string) error {
	if _, err := agent.ResolveVariant(name, ""); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.variant, s.thinking = name, ""
	return nil
}
func (s *fakeSession) SetThinking(level string) error {
	if _, err := agent.ParseThinking(level); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.thinking = level
	return nil
}
func (s *fakeSession) Offered() []orchestrator.OfferedTool { return s.offered }
func (s *fakeSession) TakeNewImage(context.Context) (sandbox.Info, error) {
	s.newImages.Add(1)
	return sandbox.Info{Kind: "docker", Image: "registry.test/team/dev:1"}, nil
}

func (s *fakeSession) StartSandbox(ctx context.Context) (sandbox.Info, error) {
	if s.start != nil {
		return s.start(ctx)
	}
	return sandbox.Info{Kind: "docker", Image: "shiro-sandbox:test", Container: "shiro-ws-test"}, nil
}
func (s *fakeSession) Compact(ctx context.Context) (int, int, error) {
	if s.compact != nil {
		return s.compact(ctx)
	}
	return 0, 0, nil
}

func (s *fakeSession) Todos() *sessiontools.TodoList { return &s.todos }
func (s *fakeSession) Memory() *sessiontools.Memory  { return s.memory }
func (s *fakeSession) Skills() []sessiontools.Skill  { return s.skills }
func (s *fakeSession) Plugins() []agent.Plugin       { return s.plugins }
func (s *fakeSession) PluginErrors() []string        { return s.pluginErr }
func (s *fakeSession) MCPStatus() []mcp.ServerStatus { return s.mcp }
func (s *fakeSession) WaitMCP(context.Context) error { return nil }
func (s *fakeSession) CompactMemory(ctx context.Context) (sessiontools.MemoryCompaction, error) {
	if s.compactMemory != nil {
		return s.compactMemory(ctx)
	}
	return sessiontools.MemoryCompaction{}, nil
}

func (s *fakeSession) Network() []egress.Record { return s.network }
func (s *fakeSession) CopyMode() bool           { return s.copyFiles != nil }
func (s *fakeSession) PreviewFile(ctx context.Context, p string) (string, bool, string, error) {
	if s.copyFiles == nil {
		return s.plainSession.PreviewFile(ctx, p)
	}
	content, ok := s.copyFiles[p]
	return content, ok, "", nil
}

func (s *fakeSession) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.prompts...)
}

// builtinsOffered describes built-in tools as the session offers them.
func builtinsOffered(names ...string) []orchestrator.OfferedTool {
	out := make([]orchestrator.OfferedTool, len(names))
	for i, n := range names {
		t := tools.Find(tools.Builtins(), n)
		out[i] = orchestrator.OfferedTool{Name: n, Kind: string(t.Set()), Gated: tools.IsGated(t)}
	}
	return out
}

// stubModel is a model the UI tests never call through the agent.
type stubModel struct{}

func (stubModel) Info() llm.ModelInfo {
	return llm.ModelInfo{Provider: "anthropic", Model: "claude-sonnet-4-5"}
}
func (stubModel) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if !yield(llm.Event{Type: llm.EventText, Text: "summary"}, nil) {
			return
		}
		yield(llm.Event{Type: llm.EventFinish, Message: llm.Text(llm.RoleAssistant, "summary")}, nil)
	}
}

// fixture is a model under test with its app and session.
type fixture struct {
	t    *testing.T
	app  *App
	sess *fakeSession
	m    *Model
	ws   string
	home string
}

// newFixture builds a model of the given width with deterministic state:
// a fixed session id and version, the sandbox ready, no terminal.
func newFixture(t *testing.T, width int, edit ...func(*Options)) *fixture {
	t.Helper()
	ws, home := t.TempDir(), t.TempDir()
	a, err := agent.New(agent.Config{Model: stubModel{}})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Version:      "1.2.3",
		Workspace:    ws,
		Paths:        config.Paths{ConfigDir: home, DataDir: home},
		Config:       config.Config{Provider: config.ProviderAnthropic, Model: "claude-sonnet-4-5", BaseURL: "https://api.anthropic.com/v1", CompactThreshold: 120000},
		Configured:   true,
		Record:       store.Record{ID: "0192f3a4-0000-7000-8000-000000000000", Cwd: ws},
		SandboxImage: "shiro-sandbox:test",
		Instructions: []string{"AGENTS.md"},
		Output:       io.Discard,
		Input:        strings.NewReader(""),
	}
	for _, e := range edit {
		e(&opts)
	}
	if opts.Opened == nil {
		w, err := workspace.Open(opts.Workspace)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		opts.Opened = w
	}
	app, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	plugins, _ := agent.Builtins([]string{"guard", "time"})
	skills, _ := sessiontools.LoadSkills(sessiontools.DefaultSkillSources("", nil))
	sess := &fakeSession{
		agent: a,
		offered: append(builtinsOffered("read_file", "write_file", "edit_file", "glob", "bash", "grep"),
			orchestrator.OfferedTool{Name: "current_time", Kind: orchestrator.KindPlugin}),
		plugins: plugins,
		skills:  skills,
		events:  app.Events,
	}
	sess.todos.OnChange = func(items []sessiontools.Todo) { sess.events(orchestrator.TodosEvent{Items: items}) }
	app.sess = sess // as Run sets it
	rt := &runtime{app: app, sess: sess, ctx: t.Context()}
	m := newModel(rt, app.opts, newStyles(io.Discard, termenv.Ascii, false))
	m.out.keep = true
	// Keys answer forms at once; the type-ahead guard has its own tests.
	m.guardFor = 0
	m.opts.Workspace = "/home/dev/project" // shown in the header; the real one is a temporary directory
	m.Update(tea.WindowSizeMsg{Width: width, Height: 40})
	m.sandboxReady(sandboxMsg{info: sandbox.Info{Kind: "docker", Image: "shiro-sandbox:test", Container: "shiro-ws-test"}})
	f := &fixture{t: t, app: app, sess: sess, m: m, ws: opts.Workspace, home: home}
	t.Cleanup(func() {
		rt.jobs.wait()
		app.Close()
	})
	return f
}

// printed is everything the model printed into the transcript, without
// escape codes.
func (f *fixture) printed() string {
	f.m.out.mu.Lock()
	defer f.m.out.mu.Unlock()
	return ansi.Strip(strings.Join(f.m.out.all, "\n"))
}

// view is the model's view without trailing spaces on its lines.
func (f *fixture) view() string { return trimLines(ansi.Strip(f.m.View())) }

func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// send applies messages directly (no commands run), drawing the view
// after each as Bubble Tea does.
func (f *fixture) send(msgs ...tea.Msg) {
	for _, msg := range msgs {
		f.m.Update(msg)
		f.m.View()
	}
}

func (f *fixture) typeText(s string) {
	for _, r := range s {
		f.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

func key(t tea.KeyType) tea.KeyMsg { return tea.KeyMsg{Type: t} }

func runes(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

// golden compares got with testdata/name.golden (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run with -update to accept):\n--- want\n%s\n--- got\n%s", file, want, got)
	}
}

// loop is a small Bubble Tea event loop for behaviour tests: it runs
// commands in goroutines as the real program does, delivers their
// messages and the app's pump, and stops when until holds.
type loop struct {
	f    *fixture
	msgs chan tea.Msg
	quit bool
	cmds sync.WaitGroup // commands still running
}

// loop starts a loop; the test's end waits for the commands it ran.
func (f *fixture) loop() *loop {
	l := &loop{f: f, msgs: make(chan tea.Msg, 1024)}
	f.t.Cleanup(l.cmds.Wait)
	return l
}

func (l *loop) exec(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	l.cmds.Add(1)
	go func() {
		defer l.cmds.Done()
		if msg := cmd(); msg != nil {
			l.msgs <- msg
		}
	}()
}

func (l *loop) deliver(msg tea.Msg) {
	switch msg := msg.(type) {
	case tea.QuitMsg:
		l.quit = true
		return
	case tea.BatchMsg:
		for _, c := range msg {
			l.exec(c)
		}
		return
	}
	if v := reflect.ValueOf(msg); v.Kind() == reflect.Slice && v.Type().Elem() == reflect.TypeOf(tea.Cmd(nil)) {
		// tea.Sequence: run in order.
		cmds := make([]tea.Cmd, v.Len())
		for i := range cmds {
			cmds[i], _ = v.Index(i).Interface().(tea.Cmd)
		}
		l.cmds.Add(1)
		go func() {
			defer l.cmds.Done()
			for _, c := range cmds {
				if c == nil {
					continue
				}
				if m := c(); m != nil {
					l.msgs <- m
				}
			}
		}()
		return
	}
	_, cmd := l.f.m.Update(msg)
	l.exec(cmd)
}

// key presses a key through the loop.
func (l *loop) key(k tea.KeyMsg) { l.deliver(k) }

func (l *loop) typeText(s string) {
	for _, r := range s {
		l.deliver(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

// until runs the loop until cond holds (5 s at most).
func (l *loop) until(what string, cond func(m *Model) bool) {
	l.f.t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	// Some conditions change without a message (a command answering the
	// agent): look again now and then.
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for !cond(l.f.m) {
		select {
		case <-poll.C:
		case msg := <-l.msgs:
			l.deliver(msg)
		case msg := <-l.f.app.pump:
			l.deliver(msg)
		case <-deadline.C:
			l.f.t.Fatalf("timed out waiting for %s; view:\n%s\nprinted:\n%s", what, l.f.view(), l.f.printed())
		}
	}
}

const (
	enter = tea.KeyEnter
	ctrlR = tea.KeyCtrlR
	esc   = tea.KeyEsc
	ctrlC = tea.KeyCtrlC
	tab   = tea.KeyTab
	up    = tea.KeyUp
	down  = tea.KeyDown
)
