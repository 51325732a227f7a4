package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/tools/mcp"
)

// MCPAsker is an Asker that also answers what MCP servers ask of the user
// while a tool call waits (the chat UI is one). The session looks for it
// on SessionOptions.Asker; an Asker without it is treated as headless for
// these questions: sampling is denied (unless --yolo), forms are declined.
type MCPAsker interface {
	// ApproveSampling decides whether a server may have the session's
	// model answer req (model names it), from the MCP client's goroutine.
	ApproveSampling(ctx context.Context, req mcp.SampleRequest, model string) (bool, error)
	// Elicit shows a server's form and returns the user's answer, from the
	// MCP client's goroutine.
	Elicit(ctx context.Context, req mcp.ElicitRequest) (mcp.ElicitResult, error)
}

// mcpCallbacks are the session's answers to the servers' sampling and
// elicitation requests.
type mcpCallbacks struct {
	s     *Session
	yolo  bool
	asker MCPAsker // nil: no one to ask
}

func (s *Session) newMCPCallbacks(opts SessionOptions) *mcpCallbacks {
	c := &mcpCallbacks{s: s, yolo: opts.Yolo}
	if a, ok := opts.Asker.(MCPAsker); ok {
		c.asker = a
	}
	return c
}

// sample runs a server's sampling request on the session's model, after
// the user's yes (or --yolo), and counts its tokens in the session's cost.
func (c *mcpCallbacks) sample(ctx context.Context, req mcp.SampleRequest) (mcp.SampleResult, error) {
	model := c.s.agent.Model()
	name := model.Info().Model
	switch {
	case c.yolo:
	case c.asker == nil:
		c.s.publish(NoticeEvent{fmt.Sprintf("mcp %s asked the model (sampling); denied: %v", req.Server, mcp.ErrSamplingHeadless)})
		return mcp.SampleResult{}, mcp.ErrSamplingHeadless
	default:
		ok, err := c.asker.ApproveSampling(ctx, req, name)
		if err != nil {
			return mcp.SampleResult{}, err
		}
		if !ok {
			return mcp.SampleResult{}, mcp.ErrSamplingDenied
		}
	}
	c.s.publish(NoticeEvent{fmt.Sprintf("mcp %s asks %s (sampling, %s)", req.Server, name, plural(len(req.Messages), "message"))})
	lr := llm.Request{System: req.System, MaxTokens: req.MaxTokens}
	for _, m := range req.Messages {
		lr.Messages = append(lr.Messages, llm.Text(llm.Role(m.Role), m.Text))
	}
	var text strings.Builder
	for ev, err := range model.Stream(ctx, lr) {
		if err != nil {
			return mcp.SampleResult{}, fmt.Errorf("the model failed: %w", err)
		}
		switch ev.Type {
		case llm.EventText:
			text.WriteString(ev.Text)
		case llm.EventFinish:
			c.s.agent.AddUsage(ev.Usage) // the session's cost: a UsageEvent
			return mcp.SampleResult{Text: text.String(), Model: name, StopReason: stopReason(ev.StopReason)}, nil
		}
	}
	return mcp.SampleResult{}, llm.ErrNoFinish
}

// stopReason is the protocol's name for a provider's stop reason.
func stopReason(s string) string {
	switch s {
	case "max_tokens", "length", "max_output_tokens":
		return "maxTokens"
	case "stop_sequence":
		return "stopSequence"
	default:
		return "endTurn"
	}
}

// elicit shows a server's form to the user; headless, it is declined.
func (c *mcpCallbacks) elicit(ctx context.Context, req mcp.ElicitRequest) (mcp.ElicitResult, error) {
	if c.asker == nil {
		c.s.publish(NoticeEvent{fmt.Sprintf("mcp %s asked you to fill in a form (elicitation); declined: no one can answer in this run", req.Server)})
		return mcp.ElicitResult{Action: mcp.ElicitDecline}, nil
	}
	res, err := c.asker.Elicit(ctx, req)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return mcp.ElicitResult{Action: mcp.ElicitCancel}, nil
		}
		return mcp.ElicitResult{}, err
	}
	return res, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
