package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/publish"
)

// The session's published ports (--publish, sandbox.publish, /ports, the
// publish_port tool): a publish.Publisher it owns, whose connections go to
// the session's sandbox as it is at each connection (a container that
// replaced the last one, opened on the first connection if need be). Its
// notices are NoticeEvents.

// openPorts publishes the configured ports, before any turn: a host port
// in use fails the session with the error naming it. A host address that is
// not loopback is a notice. With ports that can be published (a person or
// --yolo can approve), it offers the publish_port tool.
func (s *Session) openPorts(opts SessionOptions) error {
	set := opts.Sandbox.Settings
	mappings, err := publish.ParseMappings(set.Publish)
	if err != nil {
		return err
	}
	addr := set.PublishAddress
	if addr == "" {
		addr = publish.DefaultAddress
	}
	warning, err := publish.CheckAddress(addr)
	if err != nil {
		return err
	}
	if warning != "" && set.NoSandbox {
		// Without a sandbox a published port is this machine's own port:
		// on another address it would open the host's loopback servers.
		if len(mappings) > 0 {
			return fmt.Errorf("--publish-address %s with --no-sandbox would open this machine's own loopback ports to other machines: publish on a loopback address, or run in the sandbox", addr)
		}
		addr, warning = publish.DefaultAddress, ""
		s.Notices = append(s.Notices, fmt.Sprintf("sandbox.publishAddress %s is not used with --no-sandbox: ports published in this session listen on %s", set.PublishAddress, addr))
	}
	s.ports = publish.New(publish.Options{
		Address: addr,
		Sandbox: s.portDialer,
		Notice:  func(text string) { s.publish(NoticeEvent{Text: text}) },
	})
	if warning != "" {
		s.Notices = append(s.Notices, warning)
	}
	for _, m := range mappings {
		if _, err := s.ports.Add(m); err != nil {
			s.ports.Close()
			return err
		}
	}
	// Added after the agent's AutoApprove list was made of the session
	// tools: publish_port is gated, it asks.
	if opts.Asker != nil || opts.Yolo {
		s.sessionTools = append(s.sessionTools, publishPortTool{s: s})
	}
	return nil
}

// portDialer is the session's sandbox as a published port's connection
// needs it: Lazy opens it if it is not yet open, and dials through the
// sandbox of the moment (one that replaced the last).
func (s *Session) portDialer(context.Context) (sandbox.PortDialer, error) {
	return s.sandbox, nil
}

var (
	_ sandbox.PortDialer = (*Lazy)(nil)
	_ sandbox.PortLister = (*Lazy)(nil)
)

// Ports are the published ports, by host port, with their open
// connections.
func (s *Session) Ports() []publish.Port {
	if s.ports == nil {
		return nil
	}
	return s.ports.List()
}

// PortsAddress is the host address published ports listen on.
func (s *Session) PortsAddress() string {
	if s.ports == nil {
		return publish.DefaultAddress
	}
	return s.ports.Address()
}

// PublishPort publishes one more port now (/ports add, the publish_port
// tool): a host port in use is an error matching publish.ErrHostPortInUse.
func (s *Session) PublishPort(m publish.Mapping) (publish.Port, error) {
	if s.ports == nil {
		return publish.Port{}, publish.ErrClosed
	}
	return s.ports.Add(m)
}

// UnpublishPort stops publishing a host port and ends its connections.
func (s *Session) UnpublishPort(hostPort int) error {
	if s.ports == nil {
		return fmt.Errorf("host port %d: %w", hostPort, publish.ErrNotPublished)
	}
	return s.ports.Remove(hostPort)
}

// closePorts stops every published port (Close).
func (s *Session) closePorts() {
	if s.ports != nil {
		s.ports.Close()
	}
}

// PortListeners says what listens on the sandbox's TCP ports, when the
// sandbox is open and can tell; nil otherwise (it opens nothing).
func (s *Session) PortListeners(ctx context.Context) []sandbox.Listener {
	if !s.sandbox.Opened() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := s.sandbox.Listeners(ctx)
	if err != nil {
		return nil
	}
	return list
}

// ListenerText says what listens on port among list: "python3 -m
// http.server listens there", "a process of another user listens
// there" or "nothing listens there yet".
func ListenerText(list []sandbox.Listener, port int) string {
	for _, l := range list {
		if l.Port != port {
			continue
		}
		if l.Command != "" {
			return fmt.Sprintf("%s listens there", strings.TrimSpace(l.Command))
		}
		if l.Pid != 0 {
			return fmt.Sprintf("process %d listens there", l.Pid)
		}
		return "a process shiro cannot name listens there"
	}
	return "nothing listens there yet"
}

// approver puts the question of a publish_port call to next with the
// call's words for it (approvalInput); other calls go to next as they are.
func (s *Session) approver(next func(context.Context, agent.ApprovalRequest) (agent.Decision, error)) agent.Approver {
	return agent.ApproverFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
		if req.Tool == publishPortName {
			req.Input = s.approvalInput(ctx, req.Input)
		}
		return next(ctx, req)
	})
}

// approvalInput is a publish_port call's input with "approval", the
// sentence the user decides on: the container port, the host address and
// port, and what listens there.
func (s *Session) approvalInput(ctx context.Context, input json.RawMessage) json.RawMessage {
	p, err := decodePublishPort(input)
	if err != nil {
		return input
	}
	var text string
	if p.Remove {
		text = fmt.Sprintf("stop publishing %s", s.hostAddr(p.hostPort()))
	} else {
		text = fmt.Sprintf("publish port %d of the sandbox at %s (%s)", p.ContainerPort, s.hostAddr(p.hostPort()),
			ListenerText(s.PortListeners(ctx), p.ContainerPort))
	}
	out, err := json.Marshal(struct {
		Approval string `json:"approval"`
		publishPortParams
	}{text, p})
	if err != nil {
		return input
	}
	return out
}

// hostAddr is where host port listens ("127.0.0.1:8080").
func (s *Session) hostAddr(port int) string {
	return net.JoinHostPort(s.PortsAddress(), strconv.Itoa(port))
}
