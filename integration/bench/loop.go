package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/provider/anthropic"
	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/sandbox"
)

// loopBench measures the agent loop's own cost: 1,000 scripted steps, each
// calling a free host-side tool (read_file), through the fake Anthropic
// server and the real SDK; the server's own time is subtracted.
func loopBench(ctx context.Context, r *report) error {
	const steps = 1000
	ws, err := os.MkdirTemp("", "shiro-bench-loop-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		return err
	}
	replies := make([]fakemodel.Reply, 0, steps+1)
	for i := range steps {
		replies = append(replies, fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "read_file", Input: `{"path":"a.txt"}`}}})
	}
	replies = append(replies, fakemodel.Reply{Text: "done"})
	srv := fakemodel.Start(replies...)
	defer srv.Close()

	model, err := anthropic.New(anthropic.Config{APIKey: "bench", BaseURL: srv.URL + "/v1", Model: "fake"})
	if err != nil {
		return err
	}
	errs := 0
	sess, err := orchestrator.NewSession(orchestrator.SessionOptions{
		Workspace: ws,
		Model:     model,
		Sandbox:   orchestrator.SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: ws},
		MaxSteps:  steps + 10,
		// Measure the loop, not the pruning of a huge history.
		PruneThreshold: 1 << 30,
		Events:         countErrors(&errs),
	})
	if err != nil {
		return err
	}
	defer sess.Close()
	start := time.Now()
	if err := sess.Send(ctx, "loop"); err != nil {
		return err
	}
	wall := time.Since(start)
	if errs > 0 {
		return fmt.Errorf("%d errors in the loop bench", errs)
	}
	own := wall - srv.Busy()
	perStep := own / (steps + 1)
	srv.DiscardRequests()
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	n := len(sess.Messages())

	r.section("agent loop (issue 4)")
	r.add("steps through the fake Anthropic server", fmt.Sprintf("%d (+1 answer)", steps), "", true)
	r.add("wall time / of it the server's", fmt.Sprintf("%s / %s", wall.Round(time.Millisecond), srv.Busy().Round(time.Millisecond)), "", true)
	r.add("loop time per step, excluding the server", ms(perStep), "", true)
	r.add(fmt.Sprintf("heap after a %d-message session", n), fmt.Sprintf("%.1f MiB", float64(mem.HeapAlloc)/(1<<20)), "", true)
	return nil
}

// countErrors is a session's sink that counts its turns' errors (the
// events of a turn arrive one at a time).
func countErrors(n *int) func(orchestrator.Event) {
	return func(e orchestrator.Event) {
		if te, ok := e.(orchestrator.TurnEvent); ok && (te.Type == agent.EventError || te.Type == agent.EventToolError) {
			*n++
		}
	}
}
