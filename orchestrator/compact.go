package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
)

// CompactPrefix opens the message that replaces the history after /compact.
const CompactPrefix = "Summary of the session so far:\n\n"

// compactInstruction asks the model for the notes that replace the history.
const compactInstruction = `Write notes that will replace this conversation so far; you will continue the work from them alone. Cover:
- the user's goal and any constraints they set;
- the files read or changed, with their paths, and what changed;
- decisions made and why;
- commands run and their outcomes (failures included);
- what remains to do, in order.
Be concise and concrete. Answer with the notes only.`

// Compact asks the model to summarise the history and replaces the history
// with one user message carrying the summary. It returns the number of
// messages before and after (0, 0 for an empty session, which is left
// alone). The history is not touched when the call fails.
func (s *Session) Compact(ctx context.Context) (before, after int, err error) {
	history := s.agent.Messages()
	if len(history) == 0 {
		return 0, 0, nil
	}
	// Providers refuse tool calls in the history unless tools are declared.
	var specs []llm.ToolSpec
	for _, t := range s.offered() {
		specs = append(specs, llm.ToolSpec{Name: t.Name(), Description: t.Description(), Schema: t.Schema()})
	}
	req := llm.Request{
		System:   "You are shiro, a coding agent, summarising your own session so that it can go on from the summary.",
		Messages: append(history, llm.Text(llm.RoleUser, compactInstruction)),
		Tools:    specs,
	}
	summary, err := s.complete(ctx, req)
	if err != nil {
		return 0, 0, fmt.Errorf("compact the session: %w", err)
	}
	if summary == "" {
		return 0, 0, errors.New("compact the session: the model wrote no summary")
	}
	s.agent.Replace([]llm.Message{llm.Text(llm.RoleUser, CompactPrefix+summary)})
	s.book.save(s.agent.Messages(), true)
	return len(history), 1, nil
}

// complete streams one request on the session's model and returns its
// text, trimmed; its tokens are counted whatever happens.
func (s *Session) complete(ctx context.Context, req llm.Request) (string, error) {
	var (
		b     strings.Builder
		usage llm.Usage
	)
	defer func() { s.agent.AddUsage(usage) }()
	finished := false
	for ev, err := range s.agent.Model().Stream(ctx, req) {
		if err != nil {
			return "", err
		}
		switch ev.Type {
		case llm.EventText:
			b.WriteString(ev.Text)
		case llm.EventFinish:
			finished, usage = true, ev.Usage
		}
	}
	if !finished {
		return "", llm.ErrNoFinish
	}
	return strings.TrimSpace(b.String()), nil
}

// CompactMemory merges the project's never-recalled notes with the model
// (/memory). It fails when memory is off.
func (s *Session) CompactMemory(ctx context.Context) (sessiontools.MemoryCompaction, error) {
	if s.memory == nil {
		return sessiontools.MemoryCompaction{}, errors.New("memory is off in this session")
	}
	return s.memory.Compact(ctx, func(ctx context.Context, prompt string) (string, error) {
		return s.complete(ctx, llm.Request{
			System:   "You are shiro, a coding agent, tidying the notes you keep about a project.",
			Messages: []llm.Message{llm.Text(llm.RoleUser, prompt)},
		})
	})
}
