package tui

import (
	"fmt"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/sandbox/publish"
)

// portSession is a session that publishes ports (*orchestrator.Session):
// /ports lists, adds and removes them.
type portSession interface {
	Ports() []publish.Port
	PortsAddress() string
	PublishPort(m publish.Mapping) (publish.Port, error)
	UnpublishPort(hostPort int) error
}

// portsMsg is the end of a /ports add or rm, off the UI goroutine.
type portsMsg struct {
	text string
	err  error
}

// cmdPorts is /ports: the list; /ports add HOST:CONTAINER (or PORT);
// /ports rm HOST_PORT.
func (m *Model) cmdPorts(arg string) tea.Cmd {
	ps, ok := m.rt.sess.(portSession)
	if !ok {
		m.info = &infoPanel{title: "ports", body: "this session publishes no ports"}
		return nil
	}
	verb, rest, _ := strings.Cut(strings.TrimSpace(arg), " ")
	rest = strings.TrimSpace(rest)
	switch verb {
	case "", "ls", "list":
		m.info = &infoPanel{title: "ports", body: portsText(ps.PortsAddress(), ps.Ports())}
		return nil
	case "add":
		mp, err := publish.ParseMapping(rest)
		if err != nil {
			m.printError(err.Error() + " (usage: /ports add HOST_PORT:CONTAINER_PORT)")
			return nil
		}
		return func() tea.Msg {
			pt, err := ps.PublishPort(mp)
			if err != nil {
				return portsMsg{err: err}
			}
			return portsMsg{text: fmt.Sprintf("published port %d of the sandbox at %s", pt.ContainerPort, pt.Address)}
		}
	case "rm", "remove", "del":
		hp, err := strconv.Atoi(rest)
		if err != nil {
			m.printError(fmt.Sprintf("/ports rm %q: want a host port (usage: /ports rm HOST_PORT)", rest))
			return nil
		}
		return func() tea.Msg {
			if err := ps.UnpublishPort(hp); err != nil {
				return portsMsg{err: err}
			}
			return portsMsg{text: fmt.Sprintf("host port %d is no longer published", hp)}
		}
	}
	m.printError(fmt.Sprintf("/ports %s: want /ports, /ports add HOST_PORT:CONTAINER_PORT or /ports rm HOST_PORT", verb))
	return nil
}

// portsDone prints the end of a /ports add or rm.
func (m *Model) portsDone(msg portsMsg) {
	if msg.err != nil {
		m.printError(msg.err.Error())
		return
	}
	m.printInfo(clean(msg.text))
}

// portsText lists the published ports: host address:port → container
// port, and the connections open through each.
func portsText(address string, ports []publish.Port) string {
	var b strings.Builder
	if len(ports) == 0 {
		fmt.Fprintf(&b, "no ports published (they would listen on %s)\n", address)
	}
	for _, p := range ports {
		conns := "no connections"
		switch p.Conns {
		case 0:
		case 1:
			conns = "1 connection"
		default:
			conns = fmt.Sprintf("%d connections", p.Conns)
		}
		fmt.Fprintf(&b, "%-21s → sandbox port %-5d  %s\n", p.Address, p.ContainerPort, conns)
	}
	b.WriteString("\n/ports add HOST_PORT:CONTAINER_PORT publishes one more, /ports rm HOST_PORT stops one")
	return b.String()
}
