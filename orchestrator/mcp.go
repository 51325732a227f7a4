package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/mcp"
)

// mcpFirstWait is how long the first turn waits for an MCP server still
// connecting once its process has started: enough for a server that
// starts at once (so that a headless run's first step has its tools),
// never the whole start timeout of one that hangs. A project server whose
// sandbox is still opening is waited for until it starts.
const mcpFirstWait = 3 * time.Second

// sessionMCP is a session's MCP servers: the manager connecting them in the
// background.
type sessionMCP struct {
	manager *mcp.Manager
	started time.Time
	// waited is set once a turn has waited for the servers (the notice
	// about the slow ones is given once).
	waited atomic.Bool
}

// startMCP starts connecting the session's MCP servers in the background:
// the user's on the host, the project's stdio servers in the sandbox (never
// on the host: with --no-sandbox they fail). Nothing starts with NoMCP or
// without servers.
func (s *Session) startMCP(opts SessionOptions) {
	if opts.NoMCP || len(opts.MCPServers)+len(opts.ProjectMCPServers) == 0 {
		return
	}
	var open func(context.Context) (sandbox.Sandbox, error)
	if !opts.Sandbox.NoSandbox {
		open = s.sandbox.Get
	}
	m := &sessionMCP{started: time.Now()}
	s.mcp = m
	cb := s.newMCPCallbacks(opts)
	m.manager = mcp.Start(mcp.Servers(opts.MCPServers, opts.ProjectMCPServers), mcp.Options{
		Workspace: s.ws,
		Sandbox:   open,
		Version:   opts.Sandbox.Version,
		OnStatus: func(st mcp.ServerStatus) {
			for _, n := range mcpNotices(st) {
				s.publish(NoticeEvent{n})
			}
		},
		Sample: cb.sample,
		Elicit: cb.elicit,
	})
}

// mcpNotices are the lines a server's outcome is reported with: its
// failure, and the tools it has that cannot be offered.
func mcpNotices(st mcp.ServerStatus) []string {
	var out []string
	if n := st.Notice(); n != "" {
		out = append(out, n)
	}
	if len(st.Skipped) > 0 {
		out = append(out, fmt.Sprintf("mcp %s: tools not offered (name too long or clashing): %s", st.Name, strings.Join(st.Skipped, ", ")))
	}
	return out
}

// mcpTools are the tools of the MCP servers connected so far.
func (s *Session) mcpTools() []agent.Tool {
	if s.mcp == nil {
		return nil
	}
	return s.adapt(s.mcp.manager.Tools())
}

// awaitMCP waits, before a turn, for the MCP servers still connecting, but
// only mcpFirstWait from each one's start (and never longer than
// mcp.DefaultTimeout in all): a server that takes longer (or hangs) does
// not hold the prompt; its tools join the step after it connects. The
// first turn that goes without some says so.
func (s *Session) awaitMCP(ctx context.Context) {
	if s.mcp == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, mcp.DefaultTimeout)
	defer cancel()
	_ = s.mcp.manager.WaitStarted(wctx, mcpFirstWait)
	if ctx.Err() != nil || s.mcp.waited.Swap(true) {
		return
	}
	var slow []string
	for _, st := range s.mcp.manager.Status() {
		if st.Connecting {
			slow = append(slow, st.Name)
		}
	}
	if len(slow) > 0 {
		s.publish(NoticeEvent{fmt.Sprintf("mcp %s: still connecting after %s; going on without %s (%s join when %s)",
			strings.Join(slow, ", "), time.Since(s.mcp.started).Round(time.Second), them(len(slow), "it", "them"), them(len(slow), "its tools", "their tools"), them(len(slow), "it answers", "they answer"))})
	}
}

func them(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

// MCPStatus describes the session's MCP servers, the user's first, each
// group by name: where each runs (host or sandbox), its transport, the
// names of its tools, or why it failed or was ignored. Connecting is set
// on the servers still starting. It is empty with NoMCP or no servers.
// ServerStatus.Notice gives the line reporting a failure.
func (s *Session) MCPStatus() []mcp.ServerStatus {
	if s.mcp == nil {
		return nil
	}
	return s.mcp.manager.Status()
}

// WaitMCP waits until every MCP server connected or failed, or ctx ends
// (a UI refreshes its MCP line then).
func (s *Session) WaitMCP(ctx context.Context) error {
	if s.mcp == nil {
		return nil
	}
	return s.mcp.manager.Wait(ctx)
}

// closeMCP closes the MCP servers (before the sandbox, whose channel the
// project's servers use).
func (s *Session) closeMCP() error {
	if s.mcp == nil {
		return nil
	}
	return s.mcp.manager.Close()
}
