package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/shiroagent/shiro/agent/llm"
)

// responsesEndpoint is the Responses API. Nothing is stored server-side
// (store=false): reasoning comes back encrypted and is sent back inline.
type responsesEndpoint struct {
	svc       responses.ResponseService
	model     string
	reasoning bool // the model takes reasoning parameters
}

func (e *responsesEndpoint) name() string { return "responses" }

func (e *responsesEndpoint) open(ctx context.Context, req llm.Request) (iter.Seq2[llm.Event, error], error) {
	params, err := e.params(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.name(), err)
	}
	stream := e.svc.NewStreaming(ctx, params)
	if err := start(e.name(), stream); err != nil {
		return nil, err
	}
	return events(e.name(), stream, newResponsesTranslator()), nil
}

// params builds the request body.
func (e *responsesEndpoint) params(req llm.Request) (responses.ResponseNewParams, error) {
	p := responses.ResponseNewParams{
		Model: e.model,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responsesInput(req.Messages)},
		Store: oai.Bool(false),
	}
	if req.System != "" {
		p.Instructions = oai.String(req.System)
	}
	if req.MaxTokens > 0 {
		p.MaxOutputTokens = oai.Int(int64(req.MaxTokens))
	}
	for _, t := range req.Tools {
		schema, err := toolSchema(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name:        t.Name,
			Description: oai.String(t.Description),
			Parameters:  schema,
			Strict:      oai.Bool(false),
		}})
	}
	if e.reasoning {
		p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
		if eff := effort(e.model, req.Reasoning); eff != "" {
			p.Reasoning = shared.ReasoningParam{Effort: eff}
		}
	}
	return p, nil
}

// responsesInput translates the history into input items. Each assistant
// message keeps its order: a reasoning item (id and encrypted content) is
// followed by the items it produced. Item ids are sent only for items whose
// reasoning is sent too, since the API rejects an item without its
// reasoning item; reasoning without encrypted content (or from another
// provider) cannot be sent back and is dropped.
func responsesInput(msgs []llm.Message) responses.ResponseInputParam {
	var items responses.ResponseInputParam
	for _, m := range msgs {
		paired := true // the items since the last reasoning part can keep their ids
		for _, p := range m.Parts {
			ours := p.Provider == Provider && p.ItemID != ""
			switch p.Type {
			case llm.PartReasoning:
				paired = ours && p.Encrypted != ""
				if !paired {
					continue
				}
				summary := []responses.ResponseReasoningItemSummaryParam{}
				if p.Text != "" {
					summary = append(summary, responses.ResponseReasoningItemSummaryParam{Text: p.Text})
				}
				items = append(items, responses.ResponseInputItemUnionParam{OfReasoning: &responses.ResponseReasoningItemParam{
					ID:               p.ItemID,
					Summary:          summary,
					EncryptedContent: oai.String(p.Encrypted),
				}})
			case llm.PartText:
				if m.Role == llm.RoleAssistant && ours && paired {
					items = append(items, responses.ResponseInputItemUnionParam{OfOutputMessage: &responses.ResponseOutputMessageParam{
						ID:     p.ItemID,
						Status: responses.ResponseOutputMessageStatusCompleted,
						Content: []responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{
							Text:        p.Text,
							Annotations: []responses.ResponseOutputTextAnnotationUnionParam{},
						}}},
					}})
					continue
				}
				role := responses.EasyInputMessageRoleUser
				if m.Role == llm.RoleAssistant {
					role = responses.EasyInputMessageRoleAssistant
				}
				items = append(items, responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
					Role:    role,
					Content: responses.EasyInputMessageContentUnionParam{OfString: oai.String(p.Text)},
				}})
			case llm.PartToolCall:
				call := &responses.ResponseFunctionToolCallParam{CallID: p.CallID, Name: p.Name, Arguments: arguments(p.Input)}
				if ours && paired {
					call.ID = oai.String(p.ItemID)
				}
				items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCall: call})
			case llm.PartToolResult:
				items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: oai.String(p.CallID),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String(resultText(p))},
				}})
			}
		}
	}
	return items
}

// responsesTranslator assembles the assistant message from the output
// items, keyed by their output index.
type responsesTranslator struct {
	parts []llm.Part
	index map[int64]int // output index → parts index
	calls int
}

func newResponsesTranslator() *responsesTranslator {
	return &responsesTranslator{index: map[int64]int{}}
}

// part returns the part of output item i, adding one of type typ if the
// item was not announced.
func (t *responsesTranslator) part(i int64, typ llm.PartType) *llm.Part {
	k, ok := t.index[i]
	if !ok {
		k = len(t.parts)
		t.index[i] = k
		t.parts = append(t.parts, llm.Part{Type: typ, Provider: Provider})
	}
	return &t.parts[k]
}

func (t *responsesTranslator) event(ev responses.ResponseStreamEventUnion) ([]llm.Event, bool, error) {
	switch ev.Type {
	case "response.output_item.added":
		switch ev.Item.Type {
		case "reasoning":
			t.part(ev.OutputIndex, llm.PartReasoning).ItemID = ev.Item.ID
		case "message":
			t.part(ev.OutputIndex, llm.PartText).ItemID = ev.Item.ID
		case "function_call":
			p := t.part(ev.OutputIndex, llm.PartToolCall)
			p.ItemID, p.CallID, p.Name = ev.Item.ID, ev.Item.CallID, ev.Item.Name
			t.calls++
			return []llm.Event{{Type: llm.EventToolStart, Call: llm.Part{Type: llm.PartToolCall, CallID: p.CallID, Name: p.Name}}}, false, nil
		}
	case "response.reasoning_summary_part.added":
		if ev.SummaryIndex > 0 {
			p := t.part(ev.OutputIndex, llm.PartReasoning)
			p.Text += "\n\n"
			return []llm.Event{{Type: llm.EventReasoning, Text: "\n\n"}}, false, nil
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		t.part(ev.OutputIndex, llm.PartReasoning).Text += ev.Delta
		return []llm.Event{{Type: llm.EventReasoning, Text: ev.Delta}}, false, nil
	case "response.output_text.delta", "response.refusal.delta":
		t.part(ev.OutputIndex, llm.PartText).Text += ev.Delta
		return []llm.Event{{Type: llm.EventText, Text: ev.Delta}}, false, nil
	case "response.function_call_arguments.delta":
		p := t.part(ev.OutputIndex, llm.PartToolCall)
		p.Input = append(p.Input, ev.Delta...)
	case "response.output_item.done":
		return t.itemDone(ev.OutputIndex, ev.Item), false, nil
	case "response.completed", "response.incomplete":
		return []llm.Event{t.finish(ev.Response)}, true, nil
	case "response.failed":
		return nil, false, fmt.Errorf("response failed: %s", responseError(ev.Response.Error.Code, ev.Response.Error.Message))
	case "error":
		return nil, false, fmt.Errorf("stream error: %s", responseError(ev.Code, ev.Message))
	}
	return nil, false, nil
}

// itemDone completes an item from its final state.
func (t *responsesTranslator) itemDone(i int64, item responses.ResponseOutputItemUnion) []llm.Event {
	switch item.Type {
	case "reasoning":
		p := t.part(i, llm.PartReasoning)
		p.ItemID, p.Encrypted = item.ID, item.EncryptedContent
		if p.Text == "" {
			for k, s := range item.Summary {
				if k > 0 {
					p.Text += "\n\n"
				}
				p.Text += s.Text
			}
		}
	case "message":
		p := t.part(i, llm.PartText)
		p.ItemID = item.ID
		if p.Text == "" {
			for _, c := range item.Content {
				p.Text += c.Text + c.Refusal
			}
		}
	case "function_call":
		p := t.part(i, llm.PartToolCall)
		p.ItemID, p.CallID, p.Name = item.ID, item.CallID, item.Name
		if args := item.Arguments.OfString; args != "" {
			p.Input = json.RawMessage(args)
		}
		if len(p.Input) == 0 {
			p.Input = json.RawMessage("{}")
		}
		return []llm.Event{{Type: llm.EventToolCall, Call: *p}}
	}
	return nil
}

// finish makes the finish event of a completed (or incomplete) response.
func (t *responsesTranslator) finish(r responses.Response) llm.Event {
	msg := llm.Message{Role: llm.RoleAssistant}
	for _, p := range t.parts {
		if p.Type == llm.PartText && p.Text == "" && p.ItemID == "" {
			continue
		}
		msg.Parts = append(msg.Parts, p)
	}
	stop := "stop"
	switch {
	case r.IncompleteDetails.Reason == "max_output_tokens":
		stop = "length"
	case r.IncompleteDetails.Reason != "":
		stop = r.IncompleteDetails.Reason
	case t.calls > 0:
		stop = "tool_calls"
	}
	return llm.Event{
		Type:       llm.EventFinish,
		Message:    msg,
		Usage:      llm.Usage{InputTokens: int(r.Usage.InputTokens), OutputTokens: int(r.Usage.OutputTokens)},
		StopReason: stop,
	}
}

func (t *responsesTranslator) end() ([]llm.Event, error) {
	return nil, llm.ErrNoFinish
}

// responseError formats an error's code and message.
func responseError[C ~string](code C, msg string) string {
	switch {
	case code == "":
		return msg
	case msg == "":
		return string(code)
	}
	return string(code) + ": " + msg
}

// toolSchema decodes a tool's JSON schema; no schema is an empty object.
func toolSchema(t llm.ToolSpec) (map[string]any, error) {
	if len(t.Schema) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(t.Schema, &schema); err != nil {
		return nil, fmt.Errorf("schema of tool %s: %w", t.Name, err)
	}
	return schema, nil
}

// arguments are a tool call's arguments as sent back.
func arguments(input json.RawMessage) string {
	if len(input) == 0 {
		return "{}"
	}
	return string(input)
}

// resultText is a tool result as the model reads it; a failure says so.
func resultText(p llm.Part) string {
	if p.IsError {
		return "Error: " + p.Output
	}
	return p.Output
}
