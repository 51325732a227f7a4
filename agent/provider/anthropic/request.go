package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/shiroagent/shiro/agent/llm"
)

// thinkingBudgets are the thinking budgets of the reasoning levels, in
// tokens.
var thinkingBudgets = map[llm.Reasoning]int{
	llm.ReasoningLow:    2048,
	llm.ReasoningMedium: 8192,
	llm.ReasoningHigh:   16384,
	llm.ReasoningMax:    32768,
}

// adaptiveThinking reports the models that think adaptively, with an
// effort rather than a budget: Claude 4.6 and later, and the fable and
// mythos families. Budgets are deprecated on 4.6 and refused after it;
// older models know only budgets.
func adaptiveThinking(model string) bool {
	family, major, minor, ok := claudeVersion(model)
	switch {
	case !ok:
		return false
	case family == "fable" || family == "mythos":
		return true
	}
	return major > 4 || major == 4 && minor >= 6
}

// claudeVersion reads "claude-<family>-<major>[-<minor>][-<date>]" (what
// comes before "claude-", a "vendor/" or "anthropic.", is skipped).
func claudeVersion(model string) (family string, major, minor int, ok bool) {
	id := strings.ToLower(model)
	i := strings.Index(id, "claude-")
	if i < 0 {
		return "", 0, 0, false
	}
	parts := strings.Split(id[i+len("claude-"):], "-")
	if len(parts) < 2 {
		return "", 0, 0, false
	}
	family = parts[0]
	if family == "fable" || family == "mythos" {
		return family, 0, 0, true
	}
	if family != "opus" && family != "sonnet" && family != "haiku" {
		return "", 0, 0, false // claude-3-7-sonnet and the like
	}
	major, err := strconv.Atoi(parts[1])
	if err != nil {
		return "", 0, 0, false
	}
	if len(parts) > 2 && len(parts[2]) <= 2 { // not a date
		minor, _ = strconv.Atoi(parts[2])
	}
	return family, major, minor, true
}

// effort is the adaptive effort of a reasoning level: max only where the
// family offers it (opus, fable, mythos), high elsewhere.
func effort(model string, r llm.Reasoning) sdk.OutputConfigEffort {
	switch r {
	case llm.ReasoningLow:
		return sdk.OutputConfigEffortLow
	case llm.ReasoningMedium:
		return sdk.OutputConfigEffortMedium
	case llm.ReasoningHigh:
		return sdk.OutputConfigEffortHigh
	}
	if family, _, _, _ := claudeVersion(model); family == "sonnet" || family == "haiku" {
		return sdk.OutputConfigEffortHigh
	}
	return sdk.OutputConfigEffortMax
}

// answerTokens is the room left for the answer above a thinking budget when
// max_tokens has to be raised (max_tokens counts thinking too).
const answerTokens = 8192

// params translates a request into Messages API parameters.
func (m *Model) params(req llm.Request) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{Model: m.model}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	p.Messages = messages(req.Messages)

	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}

	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.maxTokens
	}
	switch {
	case req.Reasoning == "" || req.Reasoning == llm.ReasoningOff:
		// No thinking field at all: no thinking. ("disabled" is refused by
		// the models that only think adaptively.)
	case thinkingBudgets[req.Reasoning] == 0:
		return p, fmt.Errorf("unknown reasoning level %q", req.Reasoning)
	case adaptiveThinking(m.model):
		// The model decides how much to think; the effort steers it. A
		// step that did not think is fine in a tool loop.
		p.Thinking = sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}}
		p.OutputConfig = sdk.OutputConfigParam{Effort: effort(m.model, req.Reasoning)}
		maxTokens = max(maxTokens, thinkingBudgets[req.Reasoning]+answerTokens)
	case !canThink(p.Messages):
		// Thinking was switched on in the middle of a tool loop, or the
		// loop's reasoning came from another provider: the API would
		// reject a budget now, so this step goes without.
	default:
		budget := thinkingBudgets[req.Reasoning]
		p.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(budget))
		maxTokens = max(maxTokens, budget+answerTokens)
	}
	p.MaxTokens = int64(maxTokens)
	return p, nil
}

// messages translates the conversation. Tool results travel as user
// messages; consecutive messages of one role are merged, as the API wants
// roles to alternate; in a user message tool results come first.
func messages(msgs []llm.Message) []sdk.MessageParam {
	var out []sdk.MessageParam
	for _, msg := range msgs {
		var blocks []sdk.ContentBlockParamUnion
		role := llm.RoleUser
		switch msg.Role {
		case llm.RoleAssistant:
			role = llm.RoleAssistant
			blocks = assistantBlocks(msg.Parts)
		default:
			blocks = userBlocks(msg.Parts)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && roleOf(out[n-1]) == role {
			appendBlocks(&out[n-1], blocks)
			continue
		}
		if role == llm.RoleAssistant {
			out = append(out, sdk.NewAssistantMessage(blocks...))
		} else {
			out = append(out, sdk.NewUserMessage(blocks...))
		}
	}
	for i := range out {
		if out[i].OfUser != nil {
			out[i].OfUser.Content = toolResultsFirst(out[i].OfUser.Content)
		}
	}
	return out
}

func roleOf(m sdk.MessageParam) llm.Role {
	if m.OfAssistant != nil {
		return llm.RoleAssistant
	}
	return llm.RoleUser
}

func appendBlocks(m *sdk.MessageParam, blocks []sdk.ContentBlockParamUnion) {
	if m.OfAssistant != nil {
		m.OfAssistant.Content = append(m.OfAssistant.Content, blocks...)
		return
	}
	m.OfUser.Content = append(m.OfUser.Content, blocks...)
}

// toolResultsFirst moves tool results before the other blocks, keeping
// their order.
func toolResultsFirst(blocks []sdk.ContentBlockParamUnion) []sdk.ContentBlockParamUnion {
	out := make([]sdk.ContentBlockParamUnion, 0, len(blocks))
	for _, b := range blocks {
		if b.OfToolResult != nil {
			out = append(out, b)
		}
	}
	for _, b := range blocks {
		if b.OfToolResult == nil {
			out = append(out, b)
		}
	}
	return out
}

// userBlocks translates a user or tool message: text and tool results.
func userBlocks(parts []llm.Part) []sdk.ContentBlockParamUnion {
	var blocks []sdk.ContentBlockParamUnion
	for _, p := range parts {
		switch p.Type {
		case llm.PartText:
			if p.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(p.Text))
			}
		case llm.PartToolResult:
			r := sdk.ToolResultBlockParam{ToolUseID: p.CallID}
			// An empty text block is rejected; an empty result has no content.
			if p.Output != "" {
				r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: p.Output}}}
			}
			if p.IsError {
				r.IsError = param.NewOpt(true)
			}
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: &r})
		}
	}
	return blocks
}

// assistantBlocks translates an assistant message: text, Anthropic
// thinking (with its signature) and redacted thinking, tool calls.
// Reasoning from other providers, and thinking without a signature, cannot
// be sent back and is dropped.
func assistantBlocks(parts []llm.Part) []sdk.ContentBlockParamUnion {
	var blocks []sdk.ContentBlockParamUnion
	for _, p := range parts {
		switch p.Type {
		case llm.PartText:
			if p.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(p.Text))
			}
		case llm.PartReasoning:
			switch {
			case p.Provider != Provider:
			case p.Encrypted != "":
				blocks = append(blocks, sdk.NewRedactedThinkingBlock(p.Encrypted))
			case p.Signature != "":
				blocks = append(blocks, sdk.NewThinkingBlock(p.Signature, p.Text))
			}
		case llm.PartToolCall:
			blocks = append(blocks, sdk.NewToolUseBlock(p.CallID, toolInput(p.Input), p.Name))
		}
	}
	return blocks
}

// toolInput is a tool call's input as the API takes it: a JSON object. The
// model may have sent invalid JSON (the agent answered that with a tool
// error); the call then goes back with an empty object.
func toolInput(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(t)
}

// canThink reports whether thinking can be enabled for the conversation:
// when its last assistant message calls tools (the turn goes on), the API
// wants that message to start with a thinking block.
func canThink(msgs []sdk.MessageParam) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		a := msgs[i].OfAssistant
		if a == nil {
			continue
		}
		calls := false
		for _, b := range a.Content {
			calls = calls || b.OfToolUse != nil
		}
		if !calls {
			return true
		}
		first := a.Content[0]
		return first.OfThinking != nil || first.OfRedactedThinking != nil
	}
	return true
}

// toolParam translates a tool spec; its schema is sent as it is.
func toolParam(t llm.ToolSpec) (sdk.ToolParam, error) {
	tool := sdk.ToolParam{Name: t.Name}
	if t.Description != "" {
		tool.Description = param.NewOpt(t.Description)
	}
	schema := bytes.TrimSpace(t.Schema)
	switch {
	case len(schema) == 0:
		tool.InputSchema = sdk.ToolInputSchemaParam{Properties: map[string]any{}}
	case !json.Valid(schema):
		return tool, fmt.Errorf("tool %s: invalid schema", t.Name)
	default:
		tool.InputSchema = param.Override[sdk.ToolInputSchemaParam](json.RawMessage(schema))
	}
	return tool, nil
}
