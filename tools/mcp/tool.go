package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shiroagent/shiro/tools"
)

// maxNameLen is the longest tool name every provider accepts (OpenAI's
// limit; Anthropic's is larger).
const maxNameLen = 64

// ToolName is the name a server's tool is offered under:
// mcp__<server>__<tool>, with characters providers refuse in tool names
// replaced by '_'.
func ToolName(server, tool string) string {
	var b strings.Builder
	b.WriteString("mcp__")
	b.WriteString(server)
	b.WriteString("__")
	for _, r := range tool {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Tool is one server tool offered to the model. Every call needs approval
// (tools.IsGated and the agent treat every mcp__ tool as gated).
type Tool struct {
	name, server, remote string
	description          string
	schema               json.RawMessage
	session              *sdk.ClientSession
}

var _ tools.Tool = (*Tool)(nil)

func newTool(server string, t *sdk.Tool, cs *sdk.ClientSession) *Tool {
	desc := strings.TrimSpace(t.Description)
	if desc == "" {
		desc = strings.TrimSpace(t.Title)
	}
	if desc == "" {
		desc = fmt.Sprintf("The %s tool of the MCP server %s.", t.Name, server)
	}
	return &Tool{
		name:        ToolName(server, t.Name),
		server:      server,
		remote:      t.Name,
		description: desc,
		schema:      objectSchema(t.InputSchema),
		session:     cs,
	}
}

// Name is mcp__<server>__<tool>.
func (t *Tool) Name() string { return t.name }

// Server is the name of the tool's server.
func (t *Tool) Server() string { return t.server }

// Set is tools.SetNone: MCP tools belong to no tool set.
func (t *Tool) Set() tools.Set { return tools.SetNone }

// Gated is true: every call of an MCP tool asks first.
func (t *Tool) Gated() bool { return true }

// Description is the server's description of the tool.
func (t *Tool) Description() string { return t.description }

// Schema is the server's input schema, made an object schema.
func (t *Tool) Schema() json.RawMessage { return t.schema }

// Run calls the tool on its server. What the server says, failures
// included, is a result for the model; only a cancelled context is a Go
// error.
func (t *Tool) Run(ctx context.Context, _ *tools.Env, input json.RawMessage) (tools.Result, error) {
	args := json.RawMessage(bytes.TrimSpace(input))
	if len(args) == 0 || isNull(args) {
		args = json.RawMessage("{}")
	}
	res, err := t.session.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return tools.Result{}, ctx.Err()
		}
		return tools.Errorf("The MCP server %s failed to run %s: %v", t.server, t.remote, err), nil
	}
	text := renderResult(res)
	if res.IsError {
		if text == "" {
			text = fmt.Sprintf("%s reported an error without a message.", t.remote)
		}
		return tools.Result{Text: tools.Cap(text), IsError: true}, nil
	}
	if text == "" {
		text = "(no output)"
	}
	return tools.Text(tools.Cap(text)), nil
}

// renderResult joins a result's content as text: text parts as they are,
// other content described in one line; structured content when there is
// nothing else.
func renderResult(res *sdk.CallToolResult) string {
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		if s := renderContent(c); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

func renderContent(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *sdk.ResourceLink:
		return fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI)
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[embedded resource]"
		}
		if r.Text != "" {
			return fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text)
		}
		return fmt.Sprintf("[resource %s: %s, %d bytes]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
	case nil:
		return ""
	default:
		return fmt.Sprintf("[%T content]", c)
	}
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

// objectSchema makes a server's input schema something every provider
// takes: a JSON object with "type": "object" and "properties". A schema
// that is not an object is replaced by the empty object schema.
func objectSchema(s any) json.RawMessage {
	var m map[string]any
	switch s := s.(type) {
	case map[string]any:
		m = s
	case json.RawMessage:
		_ = json.Unmarshal(s, &m)
	default:
		if b, err := json.Marshal(s); err == nil {
			_ = json.Unmarshal(b, &m)
		}
	}
	if m == nil {
		m = map[string]any{}
	}
	if m["type"] != "object" {
		m["type"] = "object"
	}
	if _, ok := m["properties"].(map[string]any); !ok {
		m["properties"] = map[string]any{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return b
}
