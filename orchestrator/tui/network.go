package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// hostAskMsg asks the user about a connection no rule decides; the
// connection waits for the reply.
type hostAskMsg struct {
	id    int64
	req   egress.Request
	reply chan egress.Answer
}

// hostAskGoneMsg withdraws a question whose connection stopped waiting
// (its 2 minutes passed, or the command ended).
type hostAskGoneMsg struct{ id int64 }

// askHost puts a connection to the user: the proxy's goroutine waits
// until the user answers, ctx ends (the connection is denied) or the UI
// stops.
func (a *App) askHost(ctx context.Context, req egress.Request) egress.Answer {
	reply := make(chan egress.Answer, 1)
	id := a.askSeq.Add(1)
	if !a.post(hostAskMsg{id: id, req: req, reply: reply}) {
		return egress.Deny
	}
	select {
	case ans := <-reply:
		return ans
	case <-ctx.Done():
		a.post(hostAskGoneMsg{id: id})
		return egress.Deny
	case <-a.stop:
		return egress.Deny
	}
}

// hostPrompt is the form of one connection: the host, the port and the
// tool call that asked, and four answers; y, a, n and d answer at once.
type hostPrompt struct {
	msg  hostAskMsg
	pick *picker
}

var hostAnswers = []egress.Answer{egress.AllowOnce, egress.AllowProject, egress.Deny, egress.DenyAlways}

func newHostPrompt(msg hostAskMsg) *hostPrompt {
	hp := hostPort(msg.req.Host, msg.req.Port)
	return &hostPrompt{msg: msg, pick: newPicker(
		"Allow once",
		"Always allow "+hp+" for this project",
		"Deny",
		"Always deny "+hp+" for this project",
	)}
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

func (h *hostPrompt) help() string {
	return "y allow once | a always for this project | n deny | d always deny"
}

func (h *hostPrompt) key(m *Model, k tea.KeyMsg) tea.Cmd {
	switch k.String() {
	case "y", "Y":
		return m.answerHost(egress.AllowOnce)
	case "a", "A":
		return m.answerHost(egress.AllowProject)
	case "n", "N", "esc":
		return m.answerHost(egress.Deny)
	case "d", "D":
		return m.answerHost(egress.DenyAlways)
	}
	if enter, _ := h.pick.key(k); enter {
		return m.answerHost(hostAnswers[h.pick.sel])
	}
	return nil
}

func (h *hostPrompt) update(*Model, tea.Msg) tea.Cmd { return nil }

func (h *hostPrompt) view(m *Model, width, height int) []string {
	inner := max(width-4, 10)
	r := h.msg.req
	// Which process asks is not known (egress.Request): the form names the
	// commands running now, which the host knows, not the one the
	// connection claims to be.
	body := []string{m.st.warn.Bold(true).Render(cut("the sandbox wants to connect to "+hostPort(r.Host, r.Port), inner))}
	lines := []string{fmt.Sprintf("host %s, port %d", r.Host, r.Port)}
	if r.Addr.IsValid() && r.Addr.String() != r.Host {
		lines[0] += ", address " + r.Addr.String()
	}
	lines = append(lines, runningLines(r.Running)...)
	for _, l := range lines {
		body = append(body, rows(inner, m.st.dim.Render(clean(l)))...)
	}
	body = append(body, "")
	body = append(body, h.pick.view(m.st, inner, max(height-3-len(body), 3))...)
	box := m.st.approvalBox.Width(max(width-2, 10)).Render(strings.Join(body, "\n"))
	return append(strings.Split(box, "\n"), m.guardHelp(h.help(), width))
}

// runningLines say which commands run while a connection is asked for:
// any process of the sandbox may be the one asking, so none is named as
// the asker.
func runningLines(running []sandbox.Caller) []string {
	const show = 3
	if len(running) == 0 {
		return []string{"no command is running: a process an earlier command left behind asks"}
	}
	lines := []string{"running now (any process in the sandbox may be the one asking):"}
	for i, c := range running {
		if i == show {
			lines = append(lines, fmt.Sprintf("  and %d more", len(running)-show))
			break
		}
		call := "  " + c.Tool
		if c.Summary != "" {
			call += ": " + c.Summary
		}
		if c.ID != "" {
			call += " (tool call " + c.ID + ")"
		}
		lines = append(lines, call)
	}
	return lines
}

// showHostAsk opens the form for a connection (or queues it).
func (m *Model) showHostAsk(msg hostAskMsg) tea.Cmd {
	if m.hostAsk != nil {
		m.hostPending = append(m.hostPending, msg)
		return nil
	}
	m.flushLive(true)
	m.hostAsk = newHostPrompt(msg)
	return nil
}

// answerHost answers the form shown and opens the next one; an "always"
// answer also answers the queued questions about the same host:port.
func (m *Model) answerHost(a egress.Answer) tea.Cmd {
	h := m.hostAsk
	if h == nil {
		return nil
	}
	m.hostAsk = nil
	cmds := []tea.Cmd{replyHost(h.msg.reply, a)}
	var keep []hostAskMsg
	for _, p := range m.hostPending {
		same := p.req.Host == h.msg.req.Host && p.req.Port == h.msg.req.Port
		switch {
		case same && a == egress.AllowProject:
			cmds = append(cmds, replyHost(p.reply, egress.AllowOnce))
		case same && a == egress.DenyAlways:
			cmds = append(cmds, replyHost(p.reply, egress.Deny))
		default:
			keep = append(keep, p)
		}
	}
	m.hostPending = keep
	if len(m.hostPending) > 0 {
		next := m.hostPending[0]
		m.hostPending = m.hostPending[1:]
		cmds = append(cmds, m.showHostAsk(next))
	}
	return tea.Batch(cmds...)
}

// dropHostAsk removes a question whose connection stopped waiting.
func (m *Model) dropHostAsk(id int64) tea.Cmd {
	if m.hostAsk != nil && m.hostAsk.msg.id == id {
		m.hostAsk = nil
		if len(m.hostPending) > 0 {
			next := m.hostPending[0]
			m.hostPending = m.hostPending[1:]
			return m.showHostAsk(next)
		}
		return nil
	}
	for i, p := range m.hostPending {
		if p.id == id {
			m.hostPending = append(m.hostPending[:i:i], m.hostPending[i+1:]...)
			break
		}
	}
	return nil
}

func replyHost(reply chan<- egress.Answer, a egress.Answer) tea.Cmd {
	return func() tea.Msg {
		select {
		case reply <- a:
		default:
		}
		return nil
	}
}

// cmdNetwork is /network: every connection of the session, with totals.
func (m *Model) cmdNetwork(string) tea.Cmd {
	m.info = &infoPanel{title: "network", body: networkText(m.networkMode(), m.rt.sess.Network())}
	return nil
}

// networkMode names the sandbox's network setting.
func (m *Model) networkMode() string {
	return strings.TrimPrefix(m.network(), "network: ")
}

// networkText lists connections, oldest first, and the totals.
func networkText(mode string, recs []egress.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "network: %s\n", mode)
	if mode != "ask" {
		b.WriteString("connections are listed in ask mode only (--network ask)\n")
		return b.String()
	}
	if len(recs) == 0 {
		b.WriteString("no connections yet\n")
		return b.String()
	}
	var allowed, denied int
	var sent, recv int64
	b.WriteString("\n")
	for _, r := range recs {
		line := fmt.Sprintf("%s  %-5s %s", r.Time.Format("15:04:05"), r.Decision, hostPort(r.Host, r.Port))
		if r.Decision == egress.DecisionAllow {
			allowed++
			sent += r.Sent
			recv += r.Received
			line += fmt.Sprintf("  %s out, %s in", byteCount(r.Sent), byteCount(r.Received))
		} else {
			denied++
		}
		line += "  (" + r.Rule + ")"
		if r.Caller.Tool != "" {
			line += "  " + r.Caller.Tool
			if r.Caller.Summary != "" {
				line += ": " + r.Caller.Summary
			}
		}
		b.WriteString(clean(line) + "\n")
	}
	fmt.Fprintf(&b, "\n%d connections: %d allowed, %d denied; %s out, %s in\n", len(recs), allowed, denied, byteCount(sent), byteCount(recv))
	return b.String()
}

func byteCount(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
