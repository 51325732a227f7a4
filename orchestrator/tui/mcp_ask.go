package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/tools/mcp"
)

// The chat UI answers what MCP servers ask while a tool call waits: a
// sampling request is shown for approval, an elicitation is a form.
var _ orchestrator.MCPAsker = asker{}

type (
	// mcpAskMsg is a server's question: sample (with model) or form.
	mcpAskMsg struct {
		id     int
		sample *mcp.SampleRequest
		model  string
		form   *mcp.ElicitRequest
		reply  chan<- mcpAnswer
	}
	mcpAskGoneMsg struct{ id int }
	mcpAnswer     struct {
		allow  bool             // sampling
		result mcp.ElicitResult // a form
	}
)

func (k asker) ApproveSampling(ctx context.Context, req mcp.SampleRequest, model string) (bool, error) {
	ans, err := k.a.askMCP(ctx, mcpAskMsg{sample: &req, model: model})
	return ans.allow, err
}

func (k asker) Elicit(ctx context.Context, req mcp.ElicitRequest) (mcp.ElicitResult, error) {
	ans, err := k.a.askMCP(ctx, mcpAskMsg{form: &req})
	if err != nil {
		return mcp.ElicitResult{Action: mcp.ElicitCancel}, err
	}
	return ans.result, nil
}

// askMCP shows msg and blocks until the user answers, ctx ends (the tool
// call was given up) or the UI stops.
func (a *App) askMCP(ctx context.Context, msg mcpAskMsg) (mcpAnswer, error) {
	reply := make(chan mcpAnswer, 1)
	msg.id, msg.reply = int(a.askSeq.Add(1)), reply
	if !a.post(msg) {
		return mcpAnswer{}, errStopped
	}
	select {
	case ans := <-reply:
		return ans, nil
	case <-ctx.Done():
		a.post(mcpAskGoneMsg{id: msg.id})
		return mcpAnswer{}, ctx.Err()
	case <-a.stop:
		return mcpAnswer{}, errStopped
	}
}

// mcpPrompt is a server's question on screen.
type mcpPrompt struct {
	msg  mcpAskMsg
	form *huh.Form
	// The form's values, by field; send is the last question's answer.
	texts map[string]*string
	bools map[string]*bool
	send  bool
}

func newMCPPrompt(msg mcpAskMsg) *mcpPrompt {
	p := &mcpPrompt{msg: msg}
	if msg.form == nil {
		return p
	}
	p.texts, p.bools, p.send = map[string]*string{}, map[string]*bool{}, true
	var fields []huh.Field
	for _, f := range msg.form.Fields {
		title := clean(f.Label())
		if f.Required {
			title += " *"
		}
		desc := clean(f.Description)
		switch {
		case f.Type == "boolean":
			v := f.Default == true
			p.bools[f.Name] = &v
			fields = append(fields, huh.NewConfirm().Title(title).Description(desc).Value(&v))
		case len(f.Enum) > 0:
			v := fmt.Sprint(orEmpty(f.Default))
			p.texts[f.Name] = &v
			var opts []huh.Option[string]
			if !f.Required {
				opts = append(opts, huh.NewOption("(none)", ""))
			}
			for i, e := range f.Enum {
				label := e
				if i < len(f.EnumNames) && f.EnumNames[i] != "" {
					label = f.EnumNames[i]
				}
				opts = append(opts, huh.NewOption(clean(label), e))
			}
			fields = append(fields, huh.NewSelect[string]().Title(title).Description(desc).Options(opts...).Value(&v))
		default:
			v := ""
			if f.Default != nil {
				v = fmt.Sprint(f.Default)
			}
			p.texts[f.Name] = &v
			field := f
			fields = append(fields, huh.NewInput().Title(title).Description(desc).Value(&v).Validate(func(s string) error {
				_, err := fieldValue(field, s)
				return err
			}))
		}
	}
	fields = append(fields, huh.NewConfirm().Title("Send this to "+clean(msg.form.Server)+"?").Affirmative("send").Negative("decline").Value(&p.send))
	p.form = huh.NewForm(huh.NewGroup(fields...)).WithShowHelp(false).WithTheme(formTheme())
	return p
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

// fieldValue converts what was typed into the field's type; "" is no
// value, refused for a required field.
func fieldValue(f mcp.ElicitField, s string) (any, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		if f.Required {
			return nil, fmt.Errorf("%s is required", f.Label())
		}
		return nil, nil
	}
	switch f.Type {
	case "integer":
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: a whole number", f.Label())
		}
		return n, nil
	case "number":
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: a number", f.Label())
		}
		return n, nil
	}
	return s, nil
}

// result is the form's answer once it is completed.
func (p *mcpPrompt) result() mcp.ElicitResult {
	if !p.send {
		return mcp.ElicitResult{Action: mcp.ElicitDecline}
	}
	content := map[string]any{}
	for _, f := range p.msg.form.Fields {
		if b, ok := p.bools[f.Name]; ok {
			content[f.Name] = *b
			continue
		}
		if v, err := fieldValue(f, *p.texts[f.Name]); err == nil && v != nil {
			content[f.Name] = v
		}
	}
	return mcp.ElicitResult{Action: mcp.ElicitAccept, Content: content}
}

// key: a sampling request takes y or enter (allow) and n or esc (deny); a
// form takes its fields' keys, and esc cancels it.
func (p *mcpPrompt) key(m *Model, k tea.KeyMsg) tea.Cmd {
	if p.form == nil {
		switch {
		case k.Type == tea.KeyEnter || k.String() == "y":
			return m.answerMCP(mcpAnswer{allow: true})
		case k.Type == tea.KeyEsc || k.String() == "n":
			return m.answerMCP(mcpAnswer{})
		}
		return nil
	}
	if k.Type == tea.KeyEsc {
		return m.answerMCP(mcpAnswer{result: mcp.ElicitResult{Action: mcp.ElicitCancel}})
	}
	return p.update(m, k)
}

func (p *mcpPrompt) update(m *Model, msg tea.Msg) tea.Cmd {
	if p.form == nil {
		return nil
	}
	f, cmd := p.form.Update(msg)
	p.form = f.(*huh.Form)
	if p.form.State == huh.StateCompleted {
		return tea.Batch(cmd, m.answerMCP(mcpAnswer{result: p.result()}))
	}
	return cmd
}

func (p *mcpPrompt) view(m *Model, width, height int) []string {
	inner := max(width-4, 10)
	var body []string
	help := "y allow | n deny"
	if s := p.msg.sample; s != nil {
		body = append(body, m.st.warn.Bold(true).Render(cut(fmt.Sprintf("mcp %s asks %s to answer (sampling; billed to this session)", clean(s.Server), clean(p.msg.model)), inner)))
		var text []string
		if s.System != "" {
			text = append(text, m.st.dim.Render(cut("system: "+firstLine(clean(s.System)), inner)))
		}
		for _, msg := range s.Messages {
			text = append(text, rows(inner, msg.Role+": "+clean(msg.Text))...)
		}
		if s.MaxTokens > 0 {
			text = append(text, m.st.dim.Render(fmt.Sprintf("at most %d tokens", s.MaxTokens)))
		}
		if room := max(height-4, 2); len(text) > room {
			text = append(text[:room-1], m.st.dim.Render(cut("...", inner)))
		}
		body = append(body, text...)
	} else {
		f := p.msg.form
		body = append(body, m.st.warn.Bold(true).Render(cut("mcp "+clean(f.Server)+" asks you", inner)))
		body = append(body, rows(inner, clean(f.Message))...)
		body = append(body, "")
		p.form = p.form.WithWidth(inner)
		body = append(body, strings.Split(p.form.View(), "\n")...)
		help = "tab/enter next | esc cancel"
	}
	box := m.st.askBox.Width(max(width-2, 10)).Render(strings.Join(body, "\n"))
	return append(strings.Split(box, "\n"), m.guardHelp(help, width))
}

// showMCP opens a server's question, or queues it behind the one shown.
func (m *Model) showMCP(msg mcpAskMsg) tea.Cmd {
	if m.mcpAsk != nil {
		m.mcpAsks = append(m.mcpAsks, msg)
		return nil
	}
	m.flushLive(true)
	m.mcpAsk = newMCPPrompt(msg)
	if m.mcpAsk.form != nil {
		return m.mcpAsk.form.Init()
	}
	return nil
}

// answerMCP replies to the question shown, notes it in the transcript and
// opens the next.
func (m *Model) answerMCP(ans mcpAnswer) tea.Cmd {
	p := m.mcpAsk
	if p == nil {
		return nil
	}
	m.mcpAsk = nil
	var line string
	if s := p.msg.sample; s != nil {
		line = fmt.Sprintf("mcp %s sampling: denied", clean(s.Server))
		if ans.allow {
			line = fmt.Sprintf("mcp %s sampling: allowed (%s)", clean(s.Server), clean(p.msg.model))
		}
	} else {
		verb := map[string]string{mcp.ElicitAccept: "sent", mcp.ElicitDecline: "declined", mcp.ElicitCancel: "cancelled"}[ans.result.Action]
		line = fmt.Sprintf("mcp %s form: %s", clean(p.msg.form.Server), verb)
	}
	m.printLine(m.st.dim.Render(cut(line, m.contentWidth())))
	reply := p.msg.reply
	cmds := []tea.Cmd{func() tea.Msg {
		select {
		case reply <- ans:
		default:
		}
		return nil
	}}
	if len(m.mcpAsks) > 0 {
		next := m.mcpAsks[0]
		m.mcpAsks = m.mcpAsks[1:]
		cmds = append(cmds, m.showMCP(next))
	}
	return tea.Batch(cmds...)
}

// dropMCP forgets a question whose tool call was given up.
func (m *Model) dropMCP(id int) tea.Cmd {
	if m.mcpAsk != nil && m.mcpAsk.msg.id == id {
		m.mcpAsk = nil
		if len(m.mcpAsks) > 0 {
			next := m.mcpAsks[0]
			m.mcpAsks = m.mcpAsks[1:]
			return m.showMCP(next)
		}
		return nil
	}
	for i, a := range m.mcpAsks {
		if a.id == id {
			m.mcpAsks = append(m.mcpAsks[:i], m.mcpAsks[i+1:]...)
			break
		}
	}
	return nil
}
