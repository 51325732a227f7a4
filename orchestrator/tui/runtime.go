package tui

import (
	"context"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/mcp"
)

// runtime performs the UI's side effects. Each method returns a tea.Cmd;
// work that outlives the command (a turn, the sandbox start) runs in a
// goroutine of jobs and reports through the app's pump, so that its
// messages stay in order with the turn's events.
type runtime struct {
	app  *App
	sess Session
	// ctx is the program's lifetime. Bubble Tea gives Update no context, so
	// the runtime holds the one Run made; it is cancelled when Run ends.
	ctx  context.Context
	jobs group

	mu         sync.Mutex
	cancelTurn context.CancelFunc
	// sendMu keeps one Send at a time, so that the App's turn names the
	// Send whose events arrive.
	sendMu sync.Mutex

	// Prompt history saves run as commands, concurrently: the newest wins.
	historyMu    sync.Mutex
	historyAsked int // saves asked for (Update's side)
	historySaved int // the newest written
}

// Messages of the runtime.
type (
	eventMsg struct {
		turn int
		ev   agent.Event
	}
	turnEndMsg struct {
		turn   int
		err    error // the turn's error, if it failed
		unsent bool  // the failed prompt was taken back out of the history
	}
	overheadMsg  struct{} // the context estimate now counts the system prompt and tools
	compactedMsg struct {
		before, after int
		err           error
	}
	approvalMsg struct {
		req    agent.ApprovalRequest
		detail preview
		reply  chan<- agent.Decision
	}
	approvalGoneMsg struct{ id string }
	progressMsg     struct{ line string }
	totalMsg        struct{ total sandbox.Total }
	imageMovedMsg   struct{ move sandbox.TagMove }
	noticeMsg       struct{ text string }
	sandboxMsg      struct {
		info sandbox.Info
		err  error
	}
	interruptedMsg struct{ names, what []string }
	filesMsg       struct {
		files []string
		err   error
	}
	historyMsg struct{ entries []string }
	modelsMsg  struct {
		ids     []string
		warning string
	}
	modelSetMsg struct {
		cfg config.Config
		err error
	}
	sessionsMsg struct {
		recs   []store.Record
		counts []int
		short  map[string]string // each id as shown (store.Abbrev)
		pick   bool              // /resume with no id: offer them in a picker
		err    error
	}
	resumedMsg struct {
		rec   store.Record
		short string // rec.ID as shown
		n     int
		err   error
	}
	savedMsg struct {
		id  string
		err error
	}
	clearedMsg       struct{ id, short string }
	todosMsg         struct{ items []sessiontools.Todo }
	subagentMsg      struct{ ev sessiontools.SubagentEvent }
	mcpMsg           struct{ servers []mcp.ServerStatus }
	onboardModelsMsg struct {
		o       onboarding
		ids     []string
		warning string
	}
	memoryMsg struct {
		res sessiontools.MemoryCompaction
		err error
	}
	notesMsg struct {
		entries []sessiontools.MemoryEntry
		show    bool // /notes asked: open the panel
	}
)

// startSandbox opens the sandbox in the background.
func (rt *runtime) startSandbox() tea.Cmd {
	return func() tea.Msg {
		rt.jobs.Go(func() {
			info, err := rt.sess.StartSandbox(rt.ctx)
			rt.app.post(sandboxMsg{info: info, err: err})
		})
		return nil
	}
}

// Answers to the question a moved tag asks.
const (
	newImageYes = "yes: pull it and restart the sandbox on it"
	newImageNo  = "no: keep the image the sandbox runs"
)

// askNewImage asks whether to take the image a moved tag names now, and
// on a yes opens the sandbox again on it. What ran in the sandbox's
// session ends with it.
func (rt *runtime) askNewImage(m sandbox.TagMove) tea.Cmd {
	return func() tea.Msg {
		rt.jobs.Go(func() {
			q := sessiontools.Question{
				Text:    m.Notice() + ", or answer yes here. Use the new image now? (the sandbox's session restarts)",
				Options: []sessiontools.AskOption{{Label: newImageYes}, {Label: newImageNo}},
			}
			ans, err := rt.app.ask(rt.ctx, q)
			if err != nil || len(ans) == 0 || ans[0] != newImageYes {
				return
			}
			rt.app.post(noticeMsg{text: "pulling " + m.Ref + " and restarting the sandbox on it"})
			info, err := rt.sess.TakeNewImage(rt.ctx)
			rt.app.post(sandboxMsg{info: info, err: err})
		})
		return nil
	}
}

// readNotes reads the project's memory (the header's count; /notes'
// panel when show is set). Memory must be on.
func (rt *runtime) readNotes(show bool) tea.Cmd {
	mem := rt.sess.Memory()
	return func() tea.Msg { return notesMsg{entries: mem.Entries(), show: show} }
}

// watchMCP reports the MCP servers once they all connected or failed.
func (rt *runtime) watchMCP() tea.Cmd {
	return func() tea.Msg {
		rt.jobs.Go(func() {
			if rt.sess.WaitMCP(rt.ctx) == nil {
				rt.app.post(mcpMsg{servers: rt.sess.MCPStatus()})
			}
		})
		return nil
	}
}

// startTurn runs one turn; its events and then its end arrive as
// messages. A prompt the model never answered (the request failed) is
// taken back out of the history, so that sending it again does not send
// it twice.
func (rt *runtime) startTurn(turn int, prompt string) tea.Cmd {
	return rt.job(turn, func(ctx context.Context) turnEndMsg {
		rt.sendMu.Lock()
		rt.app.turn.Store(int64(turn))
		err := rt.sess.Send(ctx, prompt)
		rt.sendMu.Unlock()
		end := turnEndMsg{err: err}
		if err != nil && ctx.Err() == nil {
			end.unsent = rt.sess.Unsend(prompt)
		}
		return end
	})
}

// measureOverhead counts the system prompt and the tool schemas into the
// context estimate before the first turn (building the prompt reads
// files: not on the update path).
func (rt *runtime) measureOverhead() tea.Cmd {
	sess := rt.sess
	return func() tea.Msg {
		sess.MeasureOverhead()
		return overheadMsg{}
	}
}

// startCompact runs /compact as a turn (esc cancels it).
func (rt *runtime) startCompact(turn int) tea.Cmd {
	return rt.job(turn, func(ctx context.Context) turnEndMsg {
		before, after, err := rt.sess.Compact(ctx)
		rt.app.post(compactedMsg{before: before, after: after, err: err})
		return turnEndMsg{}
	})
}

// startMemoryCompact runs /memory as a turn (esc cancels it).
func (rt *runtime) startMemoryCompact(turn int) tea.Cmd {
	return rt.job(turn, func(ctx context.Context) turnEndMsg {
		res, err := rt.sess.CompactMemory(ctx)
		rt.app.post(memoryMsg{res: res, err: err})
		return turnEndMsg{}
	})
}

// job runs f as the current turn under a context esc can cancel; what it
// returns is the turn's end.
func (rt *runtime) job(turn int, f func(ctx context.Context) turnEndMsg) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithCancel(rt.ctx)
		rt.mu.Lock()
		rt.cancelTurn = cancel
		rt.mu.Unlock()
		started := rt.jobs.Go(func() {
			defer cancel()
			end := f(ctx)
			end.turn = turn
			rt.app.post(end)
		})
		if !started {
			cancel()
		}
		return nil
	}
}

// abort cancels the running turn (esc).
func (rt *runtime) abort() tea.Cmd {
	return func() tea.Msg {
		rt.mu.Lock()
		cancel := rt.cancelTurn
		rt.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return nil
	}
}

// interrupt kills the commands in flight; the turn goes on (ctrl-c).
// what names them for the transcript, as they were when ctrl-c was pressed.
func (rt *runtime) interrupt(what []string) tea.Cmd {
	return func() tea.Msg {
		return interruptedMsg{names: rt.sess.InterruptTools(), what: what}
	}
}

// answer gives the agent the user's decision.
func answer(reply chan<- agent.Decision, d agent.Decision) tea.Cmd {
	return func() tea.Msg {
		select {
		case reply <- d:
		default: // already answered
		}
		return nil
	}
}

// indexFiles walks the workspace for the @ picker.
func (rt *runtime) indexFiles() tea.Cmd {
	root := rt.app.root
	return func() tea.Msg {
		files, err := indexFiles(rt.ctx, root)
		return filesMsg{files: files, err: err}
	}
}

// loadHistory reads the project's prompt history.
func (rt *runtime) loadHistory() tea.Cmd {
	file := historyFile(rt.app.opts.Paths, rt.app.opts.Workspace)
	return func() tea.Msg { return historyMsg{entries: loadHistory(file)} }
}

// saveHistory writes the project's prompt history (a failure is shown).
// Saves may run in any order; one older than what was written is dropped.
func (rt *runtime) saveHistory(h []string) tea.Cmd {
	file := historyFile(rt.app.opts.Paths, rt.app.opts.Workspace)
	h = append([]string(nil), h...)
	rt.historyMu.Lock()
	rt.historyAsked++
	seq := rt.historyAsked
	rt.historyMu.Unlock()
	return func() tea.Msg {
		rt.historyMu.Lock()
		defer rt.historyMu.Unlock()
		if seq < rt.historySaved {
			return nil
		}
		rt.historySaved = seq
		if err := saveHistory(file, h); err != nil {
			return noticeMsg{text: err.Error()}
		}
		return nil
	}
}

// fallbackModels are offered when the endpoint lists none: the preset's
// (the config's presetId, else the provider's own preset).
func fallbackModels(cfg config.Config) []string {
	if p, ok := config.PresetByID(cfg.PresetID); ok && p.Provider == cfg.Provider {
		return p.Fallback
	}
	if p, ok := config.PresetByID(cfg.Provider); ok {
		return p.Fallback
	}
	return nil
}

// listModels asks the endpoint for its models (for /models).
func (rt *runtime) listModels(cfg config.Config) tea.Cmd {
	return func() tea.Msg {
		ids, warning := rt.fetchModels(cfg, fallbackModels(cfg))
		return modelsMsg{ids: ids, warning: warning}
	}
}

// onboardModels lists the models for the wizard's last step.
func (rt *runtime) onboardModels(o onboarding) tea.Cmd {
	return func() tea.Msg {
		ids, warning := rt.fetchModels(o.cfg, o.fallback)
		return onboardModelsMsg{o: o, ids: ids, warning: warning}
	}
}

// fetchModels asks the endpoint for its models (15 s at most); when it
// lists none, fallback is offered with a one-line warning saying why and
// what to do.
func (rt *runtime) fetchModels(cfg config.Config, fallback []string) (ids []string, warning string) {
	ctx, cancel := context.WithTimeout(rt.ctx, 15*time.Second)
	defer cancel()
	ids, err := orchestrator.ListModels(ctx, cfg)
	switch {
	case err != nil:
		return fallback, listingWarning(cfg.BaseURL, err)
	case len(ids) == 0:
		return fallback, cfg.BaseURL + " listed no models."
	}
	return ids, ""
}

// setModel builds the model cfg names and gives it to the agent.
func (rt *runtime) setModel(cfg config.Config) tea.Cmd {
	return func() tea.Msg {
		m, err := orchestrator.NewModel(cfg, rt.app.Notice)
		if err != nil {
			return modelSetMsg{cfg: cfg, err: err}
		}
		rt.sess.SetModel(m)
		return modelSetMsg{cfg: cfg}
	}
}

// saveProvider writes the onboarding's answers to the user's config file,
// then switches to the model.
func (rt *runtime) saveProvider(cfg config.Config, keyFromEnv bool) tea.Cmd {
	paths := rt.app.opts.Paths
	set := rt.setModel(cfg)
	return func() tea.Msg {
		err := config.Save(paths, func(doc map[string]any) error {
			doc["provider"] = cfg.Provider
			doc["model"] = cfg.Model
			if cfg.PresetID != "" {
				doc["presetId"] = cfg.PresetID
			} else {
				delete(doc, "presetId")
			}
			if cfg.BaseURL != "" && cfg.BaseURL != config.DefaultBaseURL[cfg.Provider] {
				doc["baseURL"] = cfg.BaseURL
			} else {
				delete(doc, "baseURL")
			}
			if cfg.APIKey != "" && !keyFromEnv {
				doc["apiKey"] = cfg.APIKey
			} else {
				delete(doc, "apiKey")
			}
			return nil
		})
		if err != nil {
			return modelSetMsg{cfg: cfg, err: err}
		}
		return set()
	}
}

// sessionsLimit is how many sessions /sessions lists.
const sessionsLimit = 15

// listSessions reads the newest sessions (for a picker when pick is set).
func (rt *runtime) listSessions(pick bool) tea.Cmd {
	st := rt.app.opts.Store
	return func() tea.Msg {
		recs, err := st.List(sessionsLimit)
		if err != nil {
			return sessionsMsg{err: err}
		}
		counts := make([]int, len(recs))
		for i, r := range recs {
			counts[i] = r.MessageCount
		}
		ids, err := st.IDs()
		if err != nil {
			return sessionsMsg{err: err}
		}
		return sessionsMsg{recs: recs, counts: counts, short: store.Abbrev(ids), pick: pick}
	}
}

// resume loads a session by id or prefix and makes it this one.
func (rt *runtime) resume(query string) tea.Cmd {
	st := rt.app.opts.Store
	return func() tea.Msg {
		rec, err := rt.sess.Resume(query)
		if err != nil {
			return resumedMsg{err: err} // no match, or the candidates of an ambiguous prefix
		}
		rt.app.post(todosMsg{items: rt.sess.Todos().Items()})
		return resumedMsg{rec: rec, short: st.Short(rec.ID), n: len(rec.Messages)}
	}
}

// save writes the session now.
func (rt *runtime) save() tea.Cmd {
	return func() tea.Msg {
		id, err := rt.sess.Save()
		return savedMsg{id: id, err: err}
	}
}

// clear starts a new, empty session record.
func (rt *runtime) clear() tea.Cmd {
	st := rt.app.opts.Store
	return func() tea.Msg {
		id, err := rt.sess.Clear()
		if err != nil {
			rt.app.post(noticeMsg{text: "saving the session failed: " + err.Error()})
		}
		return clearedMsg{id: id, short: st.Short(id)}
	}
}

// stats reads the numbers of the status bar.
func (rt *runtime) stats() stats {
	info := rt.sess.Model().Info()
	v := rt.sess.Variant()
	return stats{
		provider: info.Provider,
		model:    info.Model,
		tools:    len(rt.sess.Offered()),
		context:  rt.sess.ContextTokens(),
		usage:    rt.sess.Usage(),
		variant:  v.Name,
		thinking: string(v.Thinking),
	}
}

// stats are the status bar's numbers, read after each event.
type stats struct {
	provider, model string
	tools           int
	context         int
	usage           orchestrator.Usage
	// variant and thinking are the agent variant and level in force.
	variant, thinking string
}
