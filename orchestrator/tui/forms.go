package tui

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"
	"github.com/charmbracelet/lipgloss"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/config"
)

// formTheme is huh's base theme with shiro's accent (text fields).
func formTheme() *huh.Theme {
	t := huh.ThemeBase()
	t.Focused.Title = t.Focused.Title.Bold(true)
	t.Focused.Base = lipgloss.NewStyle()
	t.Focused.Card = t.Focused.Base
	t.Blurred = t.Focused
	return t
}

// approvalPrompt asks about one gated call: what it does (a command, a
// diff, the arguments), scrollable when it is taller than the room, and the
// three answers, always all visible; y, a and n answer at once.
type approvalPrompt struct {
	msg    approvalMsg
	pick   *picker
	answer []agent.Decision // the picker's items' decisions
	detail scroller

	// The detail's rows, built for a width.
	rowsFor int
	rows    []string
}

// newApprovalPrompt offers once, always (the command's prefixes, when the
// call is a command line whose commands all have one, then the whole
// tool) and deny.
func newApprovalPrompt(msg approvalMsg) *approvalPrompt {
	a := &approvalPrompt{msg: msg}
	labels := []string{"Yes, allow once"}
	a.answer = []agent.Decision{agent.Once}
	if p := msg.req.Prefixes; len(p) > 0 {
		labels = append(labels, "Always allow "+prefixList(p)+" this session")
		a.answer = append(a.answer, agent.AlwaysPrefix)
	}
	labels = append(labels, "Always allow "+msg.req.Tool+" this session", "No, deny")
	a.answer = append(a.answer, agent.Always, agent.Deny)
	a.pick = newPicker(labels...)
	return a
}

// prefixList shows prefixes as `"go build …", "go test …"`.
func prefixList(prefixes [][]string) string {
	parts := make([]string, len(prefixes))
	for i, p := range prefixes {
		parts[i] = `"` + clean(agent.FormatPrefix(p)) + `"`
	}
	return strings.Join(parts, ", ")
}

func (a *approvalPrompt) help() string {
	if len(a.msg.req.Prefixes) > 0 {
		return "y once | p always its prefix | a always " + a.msg.req.Tool + " | n deny"
	}
	return "y allow once | a always allow " + a.msg.req.Tool + " | n deny"
}

func (a *approvalPrompt) key(m *Model, k tea.KeyMsg) tea.Cmd {
	switch k.String() {
	case "y", "Y":
		return m.decide(agent.Once)
	case "a", "A":
		return m.decide(agent.Always)
	case "p", "P":
		if len(a.msg.req.Prefixes) > 0 {
			return m.decide(agent.AlwaysPrefix)
		}
		return nil
	case "n", "N", "esc":
		return m.decide(agent.Deny)
	}
	if a.detail.key(k, false) {
		return nil
	}
	if enter, _ := a.pick.key(k); enter {
		return m.decide(a.answer[a.pick.sel])
	}
	return nil
}

func (a *approvalPrompt) update(*Model, tea.Msg) tea.Cmd { return nil }

// detailRows is what the call does, as rows of width cells.
func (a *approvalPrompt) detailRows(st styles, width int) []string {
	if a.rowsFor == width && a.rows != nil {
		return a.rows
	}
	d := a.msg.detail
	var out []string
	switch {
	case d.command != "":
		out = rows(width, st.dim.Render(clean(d.command)))
	case d.diff && d.problem != "":
		out = rows(width, st.diffHead.Render(clean(d.label)), st.dim.Render("(cannot preview: "+clean(d.problem)+")"))
	case d.diff:
		out = renderRows(d, st, width)
	default:
		out = rows(width, st.dim.Render(clean(d.json)))
	}
	a.rowsFor, a.rows = width, out
	return out
}

func (a *approvalPrompt) view(m *Model, width, height int) []string {
	inner := max(width-4, 10)
	title := m.st.warn.Bold(true).Render(cut(a.msg.req.Tool+" wants to run", inner))
	// The box's borders and the help line take three rows; the title, a
	// blank row and the choices come first; the detail gets the rest.
	choices := a.pick.rowsNeeded()
	room := height - 3 - 2 - choices
	body := []string{title}
	if room >= 1 {
		body = append(body, a.detail.window(m.st, a.detailRows(m.st, inner), inner, max(room, 2), "pgup/pgdn scroll")...)
		body = append(body, "")
	}
	body = append(body, a.pick.view(m.st, inner, max(height-3-len(body), 3))...)
	box := m.st.approvalBox.Width(max(width-2, 10)).Render(strings.Join(body, "\n"))
	return append(strings.Split(box, "\n"), m.guardHelp(a.help(), width))
}

// renderRows draws a precomputed diff: the header, then every row.
func renderRows(d preview, st styles, width int) []string {
	out := []string{st.diffHead.Render(cut(clean(fmt.Sprintf("%s +%d -%d", d.label, d.added, d.removed)), width))}
	for _, r := range d.rows {
		text := clean(r.text)
		switch r.kind {
		case '+':
			out = append(out, st.diffAdd.Render(cut(" + "+text, width)))
		case '-':
			out = append(out, st.diffDel.Render(cut(" - "+text, width)))
		case ' ':
			out = append(out, st.diffCtx.Render(cut("   "+text, width)))
		default:
			out = append(out, st.dim.Render(cut(text, width)))
		}
	}
	return out
}

// guardHelp is a form's help line, or while the guard holds it, what keys
// do meanwhile.
func (m *Model) guardHelp(help string, width int) string {
	if !m.armed() {
		return m.st.warn.Render(cut("typing goes to your draft - pause to answer", width))
	}
	return m.st.dim.Render(cut(help, width))
}

// formModal is onboarding's steps and the pickers: a choice (pick) or a
// text field (form), with a title and a note under it. done runs when the
// user chooses or the field is submitted; esc cancels.
type formModal struct {
	title  string
	note   string
	pick   *picker
	form   *huh.Form
	done   func(m *Model) tea.Cmd
	cancel func(m *Model) tea.Cmd
	// waiting: a step that waits for the runtime (the model listing).
	waiting bool
}

func (f *formModal) key(m *Model, k tea.KeyMsg) tea.Cmd {
	if k.Type == tea.KeyEsc {
		return m.closeForm(true)
	}
	if f.pick != nil {
		if enter, _ := f.pick.key(k); enter {
			m.form = nil
			return f.done(m)
		}
		return nil
	}
	if f.form != nil {
		return f.update(m, k)
	}
	return nil
}

func (f *formModal) update(m *Model, msg tea.Msg) tea.Cmd {
	if f.form == nil {
		return nil
	}
	next, cmd := f.form.Update(msg)
	f.form = next.(*huh.Form)
	switch f.form.State {
	case huh.StateCompleted:
		m.form = nil
		return tea.Batch(cmd, f.done(m))
	case huh.StateAborted:
		return tea.Batch(cmd, m.closeForm(true))
	}
	return cmd
}

func (f *formModal) view(m *Model, width, height int) []string {
	out := []string{cut(m.st.accent.Render(f.title)+m.st.dim.Render("  esc to cancel"), width)}
	if f.note != "" {
		out = append(out, rows(width, m.st.warn.Render(clean(f.note)))...)
	}
	help := ""
	switch {
	case f.pick != nil:
		var detail []string
		if len(f.pick.items) > 0 {
			if d := f.pick.items[f.pick.sel].detail; d != "" {
				detail = rows(width, m.st.dim.Render(clean(d)))
			}
		}
		out = append(out, f.pick.view(m.st, width, max(height-len(out)-len(detail)-1, 3))...)
		out = append(out, detail...)
		help = "up/down move | enter choose | esc cancel"
	case f.form != nil:
		f.form = f.form.WithWidth(max(width, 20))
		out = append(out, strings.Split(f.form.View(), "\n")...)
		help = "enter accept | esc cancel"
	}
	return append(out, m.guardHelp(help, width))
}

// openForm shows f (in place of any other form).
func (m *Model) openForm(f *formModal) tea.Cmd {
	m.form = f
	if f.form != nil {
		f.form = f.form.WithShowHelp(false).WithTheme(formTheme()).WithWidth(max(m.contentWidth()-2, 20))
		return f.form.Init()
	}
	return nil
}

// closeForm closes the form, running its cancel when cancelled is set.
func (m *Model) closeForm(cancelled bool) tea.Cmd {
	f := m.form
	m.form = nil
	if cancelled && f != nil && f.cancel != nil {
		return f.cancel(m)
	}
	return nil
}

// onboarding is the wizard's state from step to step.
type onboarding struct {
	preset   config.Preset
	cfg      config.Config
	fromEnv  bool     // the key comes from the preset's environment variable
	label    string   // the provider's name
	fallback []string // the preset's models when the endpoint lists none
}

// openOnboarding opens the provider wizard: provider, endpoint (custom
// only), key, model. The answers go to the user's config file. Nothing is
// printed until it is done, so that the header printed with the first line
// names the provider chosen.
func (m *Model) openOnboarding() tea.Cmd {
	current := -1
	for i, p := range config.Presets {
		if p.ID == m.cfg.PresetID {
			current = i
			break
		}
	}
	if current < 0 {
		for i, p := range config.Presets {
			if p.Provider == m.cfg.Provider && (p.BaseURL == "" || p.BaseURL == m.cfg.BaseURL) && !p.AskURL {
				current = i
				break
			}
		}
	}
	pick := &picker{}
	for i, p := range config.Presets {
		label := p.Label
		if i == current && m.configured {
			label += " (current)"
		}
		pick.items = append(pick.items, pickItem{label: label})
	}
	pick.sel = max(current, 0)
	return m.openForm(&formModal{
		title:  "Which provider?",
		pick:   pick,
		cancel: onboardingCancelled,
		done: func(m *Model) tea.Cmd {
			pr := config.Presets[pick.sel]
			o := onboarding{preset: pr, cfg: m.cfg, label: pr.Label, fallback: pr.Fallback}
			o.cfg.Provider = pr.Provider
			o.cfg.PresetID = pr.ID
			o.cfg.BaseURL = cmp.Or(pr.BaseURL, config.DefaultBaseURL[pr.Provider])
			o.cfg.Model = pr.Model
			if pr.AskURL {
				return m.askEndpoint(o)
			}
			return m.askAPIKey(o)
		},
	})
}

// askEndpoint asks for a custom endpoint's URL.
func (m *Model) askEndpoint(o onboarding) tea.Cmd {
	url := ""
	in := huh.NewInput().Title("Endpoint URL").Placeholder("https://host/v1").Value(&url).
		Validate(func(s string) error {
			if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
				return errors.New("an http:// or https:// URL")
			}
			return nil
		})
	return m.openForm(&formModal{
		title:  "Set up " + o.label,
		form:   huh.NewForm(huh.NewGroup(in)),
		cancel: onboardingCancelled,
		done: func(m *Model) tea.Cmd {
			o.cfg.BaseURL = strings.TrimSpace(url)
			return m.askAPIKey(o)
		},
	})
}

// askAPIKey asks for the API key (masked). The step is skipped when the
// preset's variable holds a key (the key stays there, it is not copied
// into the config file) and for a local server that needs none.
func (m *Model) askAPIKey(o onboarding) tea.Cmd {
	envKey := ""
	if o.preset.KeyEnv != "" {
		envKey, _ = os.LookupEnv(o.preset.KeyEnv)
		envKey = strings.TrimSpace(envKey)
	}
	switch {
	case envKey != "":
		o.cfg.APIKey, o.fromEnv = envKey, true
		return m.listOnboardingModels(o, "$"+o.preset.KeyEnv+" "+maskKey(envKey))
	case o.preset.Keyless && !o.preset.AskURL:
		o.cfg.APIKey = ""
		return m.listOnboardingModels(o, "no key needed")
	}
	key := ""
	desc := ""
	if o.preset.Keyless {
		desc = "leave empty if the server needs none"
	}
	in := huh.NewInput().Title(o.label + " API key").Description(desc).EchoMode(huh.EchoModePassword).Value(&key).
		Validate(func(s string) error {
			if strings.TrimSpace(s) == "" && !o.preset.Keyless {
				return errors.New("a key is needed")
			}
			return nil
		})
	return m.openForm(&formModal{
		title:  "Set up " + o.label,
		form:   huh.NewForm(huh.NewGroup(in)),
		cancel: onboardingCancelled,
		done: func(m *Model) tea.Cmd {
			o.cfg.APIKey = strings.TrimSpace(key)
			return m.listOnboardingModels(o, "key "+maskKey(o.cfg.APIKey))
		},
	})
}

// listOnboardingModels shows that the endpoint's models are being listed
// (keyNote says which key) and lists them.
func (m *Model) listOnboardingModels(o onboarding, keyNote string) tea.Cmd {
	m.form = &formModal{
		title:   "Set up " + o.label,
		note:    fmt.Sprintf("%s - listing the models of %s...", keyNote, o.cfg.BaseURL),
		cancel:  onboardingCancelled,
		waiting: true,
	}
	return m.rt.onboardModels(o)
}

// typeOwnModel is the model picker's entry for typing an id.
const typeOwnModel = "type a model id myself..."

// pickOnboardingModel is the wizard's last step: the endpoint's models (or
// the preset's) and "type a model id myself...", or a text field when
// there is nothing to pick from.
func (m *Model) pickOnboardingModel(msg onboardModelsMsg) tea.Cmd {
	if m.form == nil || !m.form.waiting {
		return nil // cancelled meanwhile
	}
	o := msg.o
	note := ""
	if msg.warning != "" {
		note = "could not list models: " + msg.warning
	}
	if len(msg.ids) == 0 {
		return m.typeOnboardingModel(o, note)
	}
	pick := newPicker(append(slices.Clone(msg.ids), typeOwnModel)...)
	if i := slices.Index(msg.ids, o.cfg.Model); i >= 0 {
		pick.sel = i
	}
	return m.openForm(&formModal{
		title:  "Which model?",
		note:   note,
		pick:   pick,
		cancel: onboardingCancelled,
		done: func(m *Model) tea.Cmd {
			if pick.sel == len(msg.ids) {
				return m.typeOnboardingModel(o, "")
			}
			return m.finishOnboarding(o, msg.ids[pick.sel])
		},
	})
}

// typeOnboardingModel asks for the model id as text.
func (m *Model) typeOnboardingModel(o onboarding, note string) tea.Cmd {
	id := ""
	in := huh.NewInput().Title("Model id").Placeholder(o.cfg.Model).Value(&id).
		Validate(func(s string) error {
			if strings.TrimSpace(s) == "" && o.cfg.Model == "" {
				return errors.New("a model id is needed")
			}
			return nil
		})
	return m.openForm(&formModal{
		title:  "Set up " + o.label,
		note:   note,
		form:   huh.NewForm(huh.NewGroup(in)),
		cancel: onboardingCancelled,
		done: func(m *Model) tea.Cmd {
			return m.finishOnboarding(o, cmp.Or(strings.TrimSpace(id), o.cfg.Model))
		},
	})
}

// finishOnboarding saves the answers and switches to the model.
func (m *Model) finishOnboarding(o onboarding, model string) tea.Cmd {
	o.cfg.Model = model
	return m.rt.saveProvider(o.cfg, o.fromEnv)
}

func onboardingCancelled(m *Model) tea.Cmd {
	if !m.configured {
		m.printInfo(errNoProvider)
	}
	return nil
}

// maskKey shows a key as abcd...wxyz.
func maskKey(k string) string {
	switch {
	case k == "":
		return "none"
	case len(k) <= 8:
		return strings.Repeat("*", len(k))
	}
	return k[:4] + "..." + k[len(k)-4:]
}

// openModelPicker lets the user pick one of ids.
func (m *Model) openModelPicker(ids []string, note string) tea.Cmd {
	pick := &picker{}
	for i, id := range ids {
		label := id
		if id == m.stats.model {
			label += " (current)"
			pick.sel = i
		}
		pick.items = append(pick.items, pickItem{label: label})
	}
	return m.openForm(&formModal{
		title: "Pick a model",
		note:  note,
		pick:  pick,
		done:  func(m *Model) tea.Cmd { return m.switchModel(ids[pick.sel]) },
	})
}

// switchModel builds the model id on the current provider.
func (m *Model) switchModel(id string) tea.Cmd {
	cfg := m.cfg
	cfg.Model = id
	return m.rt.setModel(cfg)
}

func usageOf(in, out int) llm.Usage { return llm.Usage{InputTokens: in, OutputTokens: out} }
