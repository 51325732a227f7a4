package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/shiroagent/shiro/agent/llm"
)

// block is a content block being streamed.
type block struct {
	typ       string // the API's block type
	text      strings.Builder
	signature strings.Builder
	data      string // redacted thinking
	id, name  string // tool_use
	input     strings.Builder
	startJSON string // tool_use input given at the start
	part      *llm.Part
}

// accumulator turns the API's stream events into llm events and assembles
// the assistant message.
type accumulator struct {
	blocks     []*block
	usage      sdk.Usage
	outTokens  int64
	stopReason string
}

// add takes one stream event and returns the llm event it makes, if any.
func (a *accumulator) add(ev sdk.MessageStreamEventUnion) (llm.Event, bool, error) {
	switch ev.Type {
	case "message_start":
		a.usage = ev.Message.Usage
		a.outTokens = ev.Message.Usage.OutputTokens
		// The input is billed from here on: say so now, for a stream
		// that is cut before message_delta.
		return llm.Event{Type: llm.EventUsage, Usage: a.totalUsage()}, true, nil
	case "message_delta":
		a.stopReason = string(ev.Delta.StopReason)
		// Usage here is cumulative for the whole message.
		u := ev.Usage
		a.outTokens = u.OutputTokens
		if u.JSON.InputTokens.Valid() {
			a.usage.InputTokens = u.InputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			a.usage.CacheCreationInputTokens = u.CacheCreationInputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			a.usage.CacheReadInputTokens = u.CacheReadInputTokens
		}
	case "content_block_start":
		if ev.Index != int64(len(a.blocks)) {
			return llm.Event{}, false, fmt.Errorf("content block %d started, want %d", ev.Index, len(a.blocks))
		}
		cb := ev.ContentBlock
		b := &block{typ: cb.Type}
		a.blocks = append(a.blocks, b)
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				b.text.WriteString(cb.Text)
				return llm.Event{Type: llm.EventText, Text: cb.Text}, true, nil
			}
		case "thinking":
			b.signature.WriteString(cb.Signature)
			if cb.Thinking != "" {
				b.text.WriteString(cb.Thinking)
				return llm.Event{Type: llm.EventReasoning, Text: cb.Thinking}, true, nil
			}
		case "redacted_thinking":
			b.data = cb.Data
		case "tool_use":
			b.id, b.name = cb.ID, cb.Name
			b.startJSON = cb.JSON.Input.Raw()
			return llm.Event{Type: llm.EventToolStart, Call: llm.Part{Type: llm.PartToolCall, CallID: b.id, Name: b.name}}, true, nil
		}
	case "content_block_delta":
		b, err := a.block(ev.Type, ev.Index)
		if err != nil {
			return llm.Event{}, false, err
		}
		d := ev.Delta
		switch d.Type {
		case "text_delta":
			b.text.WriteString(d.Text)
			if d.Text != "" {
				return llm.Event{Type: llm.EventText, Text: d.Text}, true, nil
			}
		case "thinking_delta":
			b.text.WriteString(d.Thinking)
			if d.Thinking != "" {
				return llm.Event{Type: llm.EventReasoning, Text: d.Thinking}, true, nil
			}
		case "signature_delta":
			b.signature.WriteString(d.Signature)
		case "input_json_delta":
			b.input.WriteString(d.PartialJSON)
		}
	case "content_block_stop":
		b, err := a.block(ev.Type, ev.Index)
		if err != nil {
			return llm.Event{}, false, err
		}
		b.part = b.finish()
		if b.part != nil && b.part.Type == llm.PartToolCall {
			return llm.Event{Type: llm.EventToolCall, Call: *b.part}, true, nil
		}
	case "message_stop":
		return llm.Event{
			Type:       llm.EventFinish,
			Message:    a.message(),
			Usage:      a.totalUsage(),
			StopReason: a.stopReason,
		}, true, nil
	}
	return llm.Event{}, false, nil
}

func (a *accumulator) block(typ string, index int64) (*block, error) {
	if index < 0 || index >= int64(len(a.blocks)) {
		return nil, fmt.Errorf("%s for content block %d, have %d", typ, index, len(a.blocks))
	}
	return a.blocks[index], nil
}

// finish makes the block's part; nil for blocks shiro does not keep.
func (b *block) finish() *llm.Part {
	switch b.typ {
	case "text":
		return &llm.Part{Type: llm.PartText, Text: b.text.String(), Provider: Provider}
	case "thinking":
		return &llm.Part{Type: llm.PartReasoning, Text: b.text.String(), Signature: b.signature.String(), Provider: Provider}
	case "redacted_thinking":
		return &llm.Part{Type: llm.PartReasoning, Encrypted: b.data, Provider: Provider}
	case "tool_use":
		input := b.input.String()
		if input == "" {
			// No deltas: the input came whole with the start (or is empty).
			input = b.startJSON
		}
		if t := strings.TrimSpace(input); t == "" || t == "null" {
			input = "{}"
		}
		return &llm.Part{
			Type:     llm.PartToolCall,
			CallID:   b.id,
			Name:     b.name,
			Input:    json.RawMessage(input),
			Provider: Provider,
		}
	}
	return nil
}

// message assembles the assistant message from the finished blocks, in
// order. A block that never stopped is finished here.
func (a *accumulator) message() llm.Message {
	msg := llm.Message{Role: llm.RoleAssistant}
	for _, b := range a.blocks {
		p := b.part
		if p == nil {
			p = b.finish()
		}
		if p == nil || (p.Type == llm.PartText && p.Text == "") {
			continue
		}
		msg.Parts = append(msg.Parts, *p)
	}
	return msg
}

// totalUsage counts every input token, cached or not, as input.
func (a *accumulator) totalUsage() llm.Usage {
	in := a.usage.InputTokens + a.usage.CacheCreationInputTokens + a.usage.CacheReadInputTokens
	return llm.Usage{InputTokens: int(in), OutputTokens: int(a.outTokens)}
}
