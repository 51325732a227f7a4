package orchestrator

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/sandbox/publish"
)

const publishPortName = "publish_port"

//go:embed publish_port.md
var publishPortDescription string

var publishPortSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "container_port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "The TCP port a server listens on in the sandbox."},
    "host_port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "The port on the user's machine; default container_port."},
    "remove": {"type": "boolean", "description": "Stop publishing host_port (or container_port) instead."}
  },
  "required": ["container_port"],
  "additionalProperties": false
}`)

// publishPortParams are a publish_port call's arguments.
type publishPortParams struct {
	ContainerPort int  `json:"container_port"`
	HostPort      int  `json:"host_port,omitempty"`
	Remove        bool `json:"remove,omitempty"`
}

func (p publishPortParams) hostPort() int {
	if p.HostPort != 0 {
		return p.HostPort
	}
	return p.ContainerPort
}

func decodePublishPort(input json.RawMessage) (publishPortParams, error) {
	var p publishPortParams
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("invalid arguments: %w", err)
	}
	if p.ContainerPort < 1 || p.ContainerPort > 65535 {
		return p, fmt.Errorf("container_port %d is out of range (1-65535)", p.ContainerPort)
	}
	if p.HostPort < 0 || p.HostPort > 65535 {
		return p, fmt.Errorf("host_port %d is out of range (1-65535)", p.HostPort)
	}
	return p, nil
}

// publishPortTool is publish_port, a session tool that is gated: the agent
// asks before each call (the session's approver words the question, see
// approvalInput), --yolo skips that. The session offers it only where a
// person or --yolo can approve; the read-only variants withhold it.
type publishPortTool struct{ s *Session }

func (publishPortTool) Name() string            { return publishPortName }
func (publishPortTool) Description() string     { return publishPortDescription }
func (publishPortTool) Schema() json.RawMessage { return publishPortSchema }
func (publishPortTool) Gated() bool             { return true }

// Check refuses a call that cannot succeed before the user is asked.
func (t publishPortTool) Check(_ context.Context, input json.RawMessage) string {
	p, err := decodePublishPort(input)
	if err != nil {
		return err.Error()
	}
	if p.Remove && t.find(p) == nil {
		return fmt.Sprintf("port %d is not published", p.hostPort())
	}
	if !p.Remove {
		for _, pt := range t.s.Ports() {
			if pt.HostPort == p.hostPort() {
				return fmt.Sprintf("host port %d is published already (to container port %d): choose another host_port, or remove it first", pt.HostPort, pt.ContainerPort)
			}
		}
	}
	return ""
}

// find is the published port a removal means: host_port, else the port
// published at container_port's number, else the one carrying to
// container_port.
func (t publishPortTool) find(p publishPortParams) *publish.Port {
	ports := t.s.Ports()
	for _, want := range []func(publish.Port) bool{
		func(pt publish.Port) bool { return pt.HostPort == p.hostPort() },
		func(pt publish.Port) bool { return p.HostPort == 0 && pt.ContainerPort == p.ContainerPort },
	} {
		for _, pt := range ports {
			if want(pt) {
				return &pt
			}
		}
	}
	return nil
}

func (t publishPortTool) Run(ctx context.Context, input json.RawMessage, _ func(string)) (agent.Result, error) {
	p, err := decodePublishPort(input)
	if err != nil {
		return agent.Result{Output: err.Error(), IsError: true}, nil
	}
	if p.Remove {
		pt := t.find(p)
		if pt == nil {
			return agent.Result{Output: fmt.Sprintf("port %d is not published", p.hostPort()), IsError: true}, nil
		}
		if err := t.s.UnpublishPort(pt.HostPort); err != nil {
			return agent.Result{Output: err.Error(), IsError: true}, nil
		}
		return agent.Result{Output: fmt.Sprintf("%s (container port %d) is no longer published; its connections are closed", pt.Address, pt.ContainerPort)}, nil
	}
	pt, err := t.s.PublishPort(publish.Mapping{HostPort: p.hostPort(), ContainerPort: p.ContainerPort})
	if err != nil {
		if errors.Is(err, publish.ErrClosed) {
			return agent.Result{}, err
		}
		return agent.Result{Output: err.Error(), IsError: true}, nil
	}
	out := fmt.Sprintf("Published port %d of the sandbox at %s: the user can open http://%s/ (if it speaks HTTP).", pt.ContainerPort, pt.Address, pt.Address)
	if what := ListenerText(t.s.PortListeners(ctx), pt.ContainerPort); what == "nothing listens there yet" {
		out += " Nothing listens on that port in the sandbox yet: connections are closed until a server does."
	}
	return agent.Result{Output: out}, nil
}
