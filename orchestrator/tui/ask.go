package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"
	"github.com/charmbracelet/x/ansi"

	"github.com/shiroagent/shiro/orchestrator/sessiontools"
)

// ownAnswer is the picker's "type your own answer..." entry.
const ownAnswer = -1

// askMsg brings a question of the ask tool to the UI; reply takes the
// answer (nil: dismissed).
type (
	askMsg struct {
		id    int
		q     sessiontools.Question
		reply chan<- []string
	}
	askGoneMsg struct{ id int }
)

// Asker answers the ask tool: the agent's goroutine blocks until the user
// answers or dismisses the question, the turn is aborted, or the UI stops.
func (a *App) Asker() sessiontools.Asker { return sessiontools.AskerFunc(a.ask) }

func (a *App) ask(ctx context.Context, q sessiontools.Question) ([]string, error) {
	reply := make(chan []string, 1)
	id := int(a.askSeq.Add(1))
	if !a.post(askMsg{id: id, q: q, reply: reply}) {
		return nil, errStopped
	}
	select {
	case ans := <-reply:
		return ans, nil
	case <-ctx.Done():
		a.post(askGoneMsg{id: id})
		return nil, ctx.Err()
	case <-a.stop:
		return nil, errStopped
	}
}

// askPrompt is an open question: a picker of the options (one or several)
// with a "type your own answer..." entry, or a text field.
type askPrompt struct {
	msg    askMsg
	typing bool  // the text field is open
	choice int   // the picker's value (an option's index, or ownAnswer)
	chosen []int // the values of a multiple-choice picker
	text   string
	sel    *huh.Select[int]
	form   *huh.Form
}

func newAskPrompt(msg askMsg, width int) *askPrompt {
	p := &askPrompt{msg: msg}
	p.build(width, len(msg.q.Options) == 0)
	return p
}

// build makes the form: the text field when typing, else the picker.
func (p *askPrompt) build(width int, typing bool) {
	p.typing = typing
	opts := make([]huh.Option[int], 0, len(p.msg.q.Options)+1)
	for i, o := range p.msg.q.Options {
		opts = append(opts, huh.NewOption(o.Label, i))
	}
	opts = append(opts, huh.NewOption("type your own answer...", ownAnswer))
	var field huh.Field
	switch {
	case typing:
		field = huh.NewInput().Placeholder("your answer").Value(&p.text)
	case p.msg.q.Multiple:
		field = huh.NewMultiSelect[int]().Options(opts...).Value(&p.chosen).Height(len(opts) + 1).
			Validate(func(v []int) error {
				if len(v) == 0 {
					return errors.New("choose at least one (x toggles), or esc to skip")
				}
				return nil
			})
	default:
		p.sel = huh.NewSelect[int]().Options(opts...).Value(&p.choice).Height(len(opts) + 1)
		field = p.sel
	}
	p.form = huh.NewForm(huh.NewGroup(field)).WithShowHelp(false).WithTheme(formTheme()).WithWidth(max(width-6, 20))
}

// answer is what the user chose and typed, in order.
func (p *askPrompt) answer() []string {
	var out []string
	picked := p.chosen
	if !p.msg.q.Multiple && len(p.msg.q.Options) > 0 {
		picked = []int{p.choice}
	}
	for _, i := range picked {
		if i >= 0 && i < len(p.msg.q.Options) {
			out = append(out, p.msg.q.Options[i].Label)
		}
	}
	if t := strings.TrimSpace(p.text); t != "" {
		out = append(out, t)
	}
	return out
}

// wantsText says the picker's answer includes "type your own answer...".
func (p *askPrompt) wantsText() bool {
	if p.msg.q.Multiple {
		return slices.Contains(p.chosen, ownAnswer)
	}
	return p.choice == ownAnswer
}

// plainMarkers drops inline Markdown markers from the question's line in
// the transcript.
var plainMarkers = strings.NewReplacer("**", "", "__", "", "`", "")

// showAsk opens a question, or queues it behind the one shown.
func (m *Model) showAsk(msg askMsg) tea.Cmd {
	if m.ask != nil {
		m.asks = append(m.asks, msg)
		return nil
	}
	m.flushLive(true)
	m.ask = newAskPrompt(msg, m.contentWidth())
	return m.ask.form.Init()
}

// answerAsk replies to the shown question (nil: dismissed) and opens the
// next one.
func (m *Model) answerAsk(ans []string) tea.Cmd {
	p := m.ask
	if p == nil {
		return nil
	}
	m.ask = nil
	label := "(dismissed)"
	if len(ans) > 0 {
		label = strings.Join(ans, ", ")
	}
	question := plainMarkers.Replace(firstLine(p.msg.q.Text))
	m.printLine(m.st.user.Render(cut("? "+question, m.contentWidth())), m.st.dim.Render(cut("  "+label, m.contentWidth())))
	reply := p.msg.reply
	cmds := []tea.Cmd{func() tea.Msg {
		select {
		case reply <- ans:
		default:
		}
		return nil
	}}
	if len(m.asks) > 0 {
		next := m.asks[0]
		m.asks = m.asks[1:]
		cmds = append(cmds, m.showAsk(next))
	}
	return tea.Batch(cmds...)
}

// dropAsk forgets a question whose turn was aborted.
func (m *Model) dropAsk(id int) tea.Cmd {
	if m.ask != nil && m.ask.msg.id == id {
		m.ask = nil
		if len(m.asks) > 0 {
			next := m.asks[0]
			m.asks = m.asks[1:]
			return m.showAsk(next)
		}
		return nil
	}
	m.asks = slices.DeleteFunc(m.asks, func(a askMsg) bool { return a.id == id })
	return nil
}

// askKey handles a key while a question is open. Esc leaves the text field
// for the picker, or dismisses the question.
func (m *Model) askKey(k tea.KeyMsg) tea.Cmd {
	p := m.ask
	if k.Type == tea.KeyEsc {
		if p.typing && len(p.msg.q.Options) > 0 {
			p.text = ""
			p.build(m.contentWidth(), false)
			return p.form.Init()
		}
		return m.answerAsk(nil)
	}
	return m.askUpdate(k)
}

// askUpdate passes a message to the question's form and acts on its end.
func (m *Model) askUpdate(msg tea.Msg) tea.Cmd {
	p := m.ask
	f, cmd := p.form.Update(msg)
	p.form = f.(*huh.Form)
	if p.form.State != huh.StateCompleted {
		return cmd
	}
	if !p.typing && p.wantsText() {
		p.build(m.contentWidth(), true)
		return tea.Batch(cmd, p.form.Init())
	}
	return tea.Batch(cmd, m.answerAsk(p.answer()))
}

// askView is the question's panel.
func (m *Model) askView() string {
	p := m.ask
	w := m.contentWidth()
	inner := max(w-4, 16)
	lines := []string{m.st.warn.Bold(true).Render("shiro is asking")}
	if q := strings.TrimSpace(m.md.render(p.msg.q.Text, inner)); q != "" {
		lines = append(lines, q)
	}
	lines = append(lines, "", p.form.View())
	if p.sel != nil && !p.typing {
		if i, ok := p.sel.Hovered(); ok && i >= 0 && i < len(p.msg.q.Options) && p.msg.q.Options[i].Detail != "" {
			lines = append(lines, m.st.dim.Render(ansi.Wrap(p.msg.q.Options[i].Detail, inner, "")))
		}
	}
	help := "up/down move | enter choose | esc skip"
	switch {
	case p.typing && len(p.msg.q.Options) > 0:
		help = "enter send | esc back to the options"
	case p.typing:
		help = "enter send | esc skip"
	case p.msg.q.Multiple && len(p.chosen) > 0:
		help = fmt.Sprintf("up/down move | x toggle | enter: submit %d | esc skip", len(p.chosen))
	case p.msg.q.Multiple:
		help = "up/down move | x toggle | esc skip"
	}
	return m.st.askBox.Width(max(w-2, 10)).Render(strings.Join(lines, "\n")) + "\n" + m.st.dim.Render(help)
}
