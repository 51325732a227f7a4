package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools"
	"github.com/shiroagent/shiro/tools/mcp"
)

// mcpBench measures one MCP tool call to the same stdio server run on the
// host (a user's server) and in the sandbox over the command channel (a
// project's server), and the start of each.
func mcpBench(ctx context.Context, r *report) error {
	ws, err := os.MkdirTemp("", "shiro-bench-mcp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	server := filepath.Join(ws, "mcpecho")
	_, file, _, _ := runtime.Caller(0)
	build := exec.CommandContext(ctx, "go", "build", "-o", server, "./integration/internal/mcpecho")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the MCP server: %v\n%s", err, out)
	}

	_, sb, done, err := openSandbox(ctx, ws)
	if err != nil {
		return err
	}
	defer done()

	decl := json.RawMessage(fmt.Sprintf(`{"command": %q}`, server))
	start := time.Now()
	m := mcp.Start(mcp.Servers(map[string]json.RawMessage{"host": decl}, map[string]json.RawMessage{"box": decl}), mcp.Options{
		Workspace: ws,
		Sandbox:   func(context.Context) (sandbox.Sandbox, error) { return sb, nil },
	})
	defer m.Close()
	if err := m.Wait(ctx); err != nil {
		return err
	}
	connected := time.Since(start)
	for _, st := range m.Status() {
		if st.Err != nil {
			return fmt.Errorf("mcp %s: %w", st.Name, st.Err)
		}
	}
	call := func(name string) func() error {
		var tool tools.Tool
		for _, t := range m.Tools() {
			if t.Name() == name {
				tool = t
			}
		}
		return func() error {
			if tool == nil {
				return errors.New("no tool " + name)
			}
			res, err := tool.Run(ctx, nil, json.RawMessage(`{"text":"ping"}`))
			if err == nil && (res.IsError || res.Text != "ping") {
				err = fmt.Errorf("%s answered %q", name, res.Text)
			}
			return err
		}
	}
	for range 20 { // warm up
		if err := call("mcp__host__echo")(); err != nil {
			return err
		}
		if err := call("mcp__box__echo")(); err != nil {
			return err
		}
	}
	host, err := timeN(200, call("mcp__host__echo"))
	if err != nil {
		return err
	}
	box, err := timeN(200, call("mcp__box__echo"))
	if err != nil {
		return err
	}
	r.section("MCP (issue 6)")
	r.add("both servers connected (host + sandbox, in parallel)", ms(connected), "", true)
	hm, bm := median(host), median(box)
	r.add("echo call, host stdio server, median of 200", ms(hm), "", true)
	r.add("echo call, project server in the sandbox over the channel, median of 200", ms(bm), "", true)
	r.add("sandbox / host", fmt.Sprintf("%.2fx", float64(bm)/float64(hm)), "", true)
	return nil
}
