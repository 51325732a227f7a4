package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"

	"github.com/shiroagent/shiro/orchestrator/sessiontools"
)

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

// ask answers the ask tool: the agent's goroutine blocks until the user
// answers or dismisses the question, the turn is aborted, or the UI stops.
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

// ownAnswerLabel is the picker's last entry.
const ownAnswerLabel = "type your own answer..."

// askPrompt is an open question: a picker of the options (one, or several
// marked with x) with a "type your own answer..." entry, or a text field.
type askPrompt struct {
	msg    askMsg
	typing bool // the text field is open
	pick   *picker
	text   string
	form   *huh.Form
	err    string // why enter did nothing (a multiple choice with none marked)
}

func newAskPrompt(msg askMsg) *askPrompt {
	p := &askPrompt{msg: msg, pick: &picker{multi: msg.q.Multiple}}
	for _, o := range msg.q.Options {
		p.pick.items = append(p.pick.items, pickItem{label: o.Label, detail: o.Detail})
	}
	p.pick.items = append(p.pick.items, pickItem{label: ownAnswerLabel})
	if len(msg.q.Options) == 0 {
		p.openText()
	}
	return p
}

// own is the index of "type your own answer...".
func (p *askPrompt) own() int { return len(p.msg.q.Options) }

// openText opens the text field.
func (p *askPrompt) openText() tea.Cmd {
	p.typing, p.text = true, ""
	p.form = huh.NewForm(huh.NewGroup(huh.NewInput().Placeholder("your answer").Value(&p.text))).
		WithShowHelp(false).WithTheme(formTheme())
	return p.form.Init()
}

// answer is what the user chose and typed, in order.
func (p *askPrompt) answer() []string {
	var out []string
	picked := p.pick.marked()
	if !p.msg.q.Multiple && len(p.msg.q.Options) > 0 {
		picked = []int{p.pick.sel}
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

// wantsText says the answer includes "type your own answer...".
func (p *askPrompt) wantsText() bool {
	if p.msg.q.Multiple {
		return slices.Contains(p.pick.marked(), p.own())
	}
	return p.pick.sel == p.own()
}

// key: esc leaves the text field for the options, or dismisses the
// question; enter chooses.
func (p *askPrompt) key(m *Model, k tea.KeyMsg) tea.Cmd {
	if k.Type == tea.KeyEsc {
		if p.typing && len(p.msg.q.Options) > 0 {
			p.typing, p.form, p.text = false, nil, ""
			return nil
		}
		return m.answerAsk(nil)
	}
	if p.typing {
		return p.update(m, k)
	}
	enter, _ := p.pick.key(k)
	if !enter {
		p.err = ""
		return nil
	}
	if p.msg.q.Multiple && len(p.pick.marked()) == 0 {
		p.err = "choose at least one (x marks), or esc to skip"
		return nil
	}
	if p.wantsText() {
		return p.openText()
	}
	return m.answerAsk(p.answer())
}

func (p *askPrompt) update(m *Model, msg tea.Msg) tea.Cmd {
	if !p.typing || p.form == nil {
		return nil
	}
	f, cmd := p.form.Update(msg)
	p.form = f.(*huh.Form)
	if p.form.State == huh.StateCompleted {
		return tea.Batch(cmd, m.answerAsk(p.answer()))
	}
	return cmd
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
	m.ask = newAskPrompt(msg)
	if m.ask.form != nil {
		return m.ask.form.Init()
	}
	return nil
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
	question := plainMarkers.Replace(firstLine(clean(p.msg.q.Text)))
	w := m.contentWidth()
	m.printLine(m.st.user.Render(cut("? "+question, w)), m.st.dim.Render(cut("  "+clean(label), w)))
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

// view is the question's panel: the question (scrolled when long), the
// picker or the field, the highlighted option's detail, the keys.
func (p *askPrompt) view(m *Model, width, height int) []string {
	inner := max(width-4, 10)
	body := []string{m.st.warn.Bold(true).Render("shiro is asking")}
	question := rows(inner, strings.TrimSpace(m.md.render(clean(p.msg.q.Text), inner)))
	var detail []string
	if !p.typing {
		if d := p.pick.items[p.pick.sel].detail; d != "" {
			detail = rows(inner, m.st.dim.Render(clean(d)))
		}
	}
	if p.err != "" {
		detail = append(detail, m.st.errText.Render(cut(p.err, inner)))
	}
	// Borders and help take three rows; the choices what they need; the
	// question the rest, at least three rows.
	var choices []string
	if p.typing {
		p.form = p.form.WithWidth(inner)
		choices = strings.Split(p.form.View(), "\n")
	} else {
		room := max(height-3-1-len(detail)-1-min(len(question), 3), 3)
		choices = p.pick.view(m.st, inner, room)
	}
	qroom := max(height-3-1-1-len(choices)-len(detail), 2)
	if len(question) > qroom {
		question = append(question[:qroom-1], m.st.dim.Render(cut("...", inner)))
	}
	body = append(body, question...)
	body = append(body, "")
	body = append(body, choices...)
	body = append(body, detail...)
	help := "up/down move | enter choose | esc skip"
	switch {
	case p.typing && len(p.msg.q.Options) > 0:
		help = "enter send | esc back to the options"
	case p.typing:
		help = "enter send | esc skip"
	case p.msg.q.Multiple && len(p.pick.marked()) > 0:
		help = fmt.Sprintf("up/down move | x mark | enter: submit %d | esc skip", len(p.pick.marked()))
	case p.msg.q.Multiple:
		help = "up/down move | x mark | esc skip"
	}
	box := m.st.askBox.Width(max(width-2, 10)).Render(strings.Join(body, "\n"))
	return append(strings.Split(box, "\n"), m.guardHelp(help, width))
}
