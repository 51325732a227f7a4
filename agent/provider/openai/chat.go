package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/shiroagent/shiro/agent/llm"
)

// chatEndpoint is the Chat Completions API, official or compatible.
type chatEndpoint struct {
	svc        oai.ChatCompletionService
	model      string
	compatible bool // a compatible server: max_tokens
	reasoning  bool // the model takes reasoning_effort
	// noEffort: the compatible server rejected reasoning_effort once; it
	// is not sent again for this model.
	noEffort atomic.Bool
}

func (e *chatEndpoint) name() string { return "chat-completions" }

func (e *chatEndpoint) open(ctx context.Context, req llm.Request) (iter.Seq2[llm.Event, error], error) {
	params, err := e.params(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.name(), err)
	}
	stream := e.svc.NewStreaming(ctx, params)
	err = start(e.name(), stream)
	if err != nil && e.compatible && params.ReasoningEffort != "" && rejectsEffort(err) {
		// A compatible server that does not know the parameter (or not
		// for this model) refuses the whole request: ask again without.
		e.noEffort.Store(true)
		params.ReasoningEffort = ""
		stream = e.svc.NewStreaming(ctx, params)
		err = start(e.name(), stream)
	}
	if err != nil {
		return nil, err
	}
	return events(e.name(), stream, &chatTranslator{}), nil
}

// rejectsEffort reports whether a refused request names reasoning_effort
// (or reasoning) as the parameter the server does not take.
func rejectsEffort(err error) bool {
	var se *llm.StatusError
	if !errors.As(err, &se) || (se.Status != 400 && se.Status != 422) {
		return false
	}
	m := se.Message
	if se.Err != nil {
		m += " " + se.Err.Error()
	}
	return strings.Contains(strings.ToLower(m), "reasoning")
}

// params builds the request body.
func (e *chatEndpoint) params(req llm.Request) (oai.ChatCompletionNewParams, error) {
	p := oai.ChatCompletionNewParams{
		Model:         e.model,
		Messages:      chatMessages(req.System, req.Messages),
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)},
	}
	if req.MaxTokens > 0 {
		// Compatible servers know max_tokens; OpenAI's reasoning models
		// accept only max_completion_tokens.
		if e.compatible {
			p.MaxTokens = oai.Int(int64(req.MaxTokens))
		} else {
			p.MaxCompletionTokens = oai.Int(int64(req.MaxTokens))
		}
	}
	for _, t := range req.Tools {
		schema, err := toolSchema(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: oai.String(t.Description),
			Parameters:  schema,
		}))
	}
	if e.reasoning && !e.noEffort.Load() {
		p.ReasoningEffort = effort(e.model, req.Reasoning)
	}
	return p, nil
}

// chatMessages translates the history. Reasoning has no place in a chat
// request (DeepSeek even rejects reasoning_content sent back), so reasoning
// parts are dropped, as are assistant messages left empty.
func chatMessages(system string, msgs []llm.Message) []oai.ChatCompletionMessageParamUnion {
	var out []oai.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, oai.SystemMessage(system))
	}
	for _, m := range msgs {
		if m.Role == llm.RoleAssistant {
			if a, ok := chatAssistant(m); ok {
				out = append(out, oai.ChatCompletionMessageParamUnion{OfAssistant: a})
			}
			continue
		}
		for _, p := range m.Parts {
			switch p.Type {
			case llm.PartText:
				out = append(out, oai.UserMessage(p.Text))
			case llm.PartToolResult:
				out = append(out, oai.ToolMessage(resultText(p), p.CallID))
			}
		}
	}
	return out
}

// chatAssistant is an assistant message: its text and its tool calls.
func chatAssistant(m llm.Message) (*oai.ChatCompletionAssistantMessageParam, bool) {
	a := &oai.ChatCompletionAssistantMessageParam{}
	var text strings.Builder
	for _, p := range m.Parts {
		switch p.Type {
		case llm.PartText:
			text.WriteString(p.Text)
		case llm.PartToolCall:
			a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
				ID:       p.CallID,
				Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: p.Name, Arguments: arguments(p.Input)},
			}})
		}
	}
	if text.Len() > 0 {
		a.Content.OfString = oai.String(text.String())
	}
	return a, text.Len() > 0 || len(a.ToolCalls) > 0
}

// chatCall is a tool call being streamed.
type chatCall struct {
	id, name string
	args     strings.Builder
	started  bool
}

// chatTranslator assembles the assistant message from the chunks.
type chatTranslator struct {
	reasoning, text strings.Builder
	calls           []*chatCall
	byIndex         map[int64]*chatCall
	finish          string
	usage           llm.Usage
}

func (t *chatTranslator) event(chunk oai.ChatCompletionChunk) ([]llm.Event, bool, error) {
	if u := chunk.Usage; u.PromptTokens > 0 || u.CompletionTokens > 0 {
		t.usage = llm.Usage{InputTokens: int(u.PromptTokens), OutputTokens: int(u.CompletionTokens)}
	}
	if len(chunk.Choices) == 0 {
		return nil, false, nil
	}
	var evs []llm.Event
	c := chunk.Choices[0]
	if r := reasoningContent(c.Delta); r != "" {
		t.reasoning.WriteString(r)
		evs = append(evs, llm.Event{Type: llm.EventReasoning, Text: r})
	}
	for _, s := range []string{c.Delta.Content, c.Delta.Refusal} {
		if s != "" {
			t.text.WriteString(s)
			evs = append(evs, llm.Event{Type: llm.EventText, Text: s})
		}
	}
	for _, tc := range c.Delta.ToolCalls {
		call := t.call(tc.Index)
		if call.id == "" {
			call.id = tc.ID
		}
		if call.name == "" {
			call.name = tc.Function.Name
		}
		call.args.WriteString(tc.Function.Arguments)
		if !call.started && call.name != "" {
			call.started = true
			if call.id == "" {
				call.id = fmt.Sprintf("call_%d", tc.Index)
			}
			evs = append(evs, llm.Event{Type: llm.EventToolStart, Call: llm.Part{Type: llm.PartToolCall, CallID: call.id, Name: call.name}})
		}
	}
	if c.FinishReason != "" && t.finish == "" {
		t.finish = c.FinishReason
		for _, call := range t.calls {
			evs = append(evs, llm.Event{Type: llm.EventToolCall, Call: call.part()})
		}
	}
	return evs, false, nil
}

// call returns the call at a tool-call index, adding it when new.
func (t *chatTranslator) call(i int64) *chatCall {
	if t.byIndex == nil {
		t.byIndex = map[int64]*chatCall{}
	}
	c, ok := t.byIndex[i]
	if !ok {
		c = &chatCall{}
		t.byIndex[i] = c
		t.calls = append(t.calls, c)
	}
	return c
}

// part is the finished call.
func (c *chatCall) part() llm.Part {
	return llm.Part{Type: llm.PartToolCall, CallID: c.id, Name: c.name, Input: json.RawMessage(arguments(json.RawMessage(c.args.String()))), Provider: Provider}
}

// end finishes the message once the stream is over: the usage chunk comes
// after the finish reason.
func (t *chatTranslator) end() ([]llm.Event, error) {
	if t.finish == "" {
		return nil, llm.ErrNoFinish
	}
	msg := llm.Message{Role: llm.RoleAssistant}
	if t.reasoning.Len() > 0 {
		msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartReasoning, Text: t.reasoning.String(), Provider: Provider})
	}
	if t.text.Len() > 0 {
		msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartText, Text: t.text.String(), Provider: Provider})
	}
	for _, c := range t.calls {
		msg.Parts = append(msg.Parts, c.part())
	}
	stop := t.finish
	if stop == "stop" && len(t.calls) > 0 {
		stop = "tool_calls" // some compatible servers say stop after tool calls
	}
	return []llm.Event{{Type: llm.EventFinish, Message: msg, Usage: t.usage, StopReason: stop}}, nil
}

// reasoningContent is the reasoning delta compatible servers send outside
// the OpenAI schema: reasoning_content (vLLM, DeepSeek, llama.cpp) or
// reasoning (OpenRouter, Ollama, newer vLLM).
func reasoningContent(d oai.ChatCompletionChunkChoiceDelta) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[key]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}
