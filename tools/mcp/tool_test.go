package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestToolName(t *testing.T) {
	t.Parallel()
	tests := []struct{ server, tool, want string }{
		{"srv", "echo", "mcp__srv__echo"},
		{"gh", "issues.list/all", "mcp__gh__issues_list_all"},
		{"a-b", "x-y_z", "mcp__a-b__x-y_z"},
	}
	for _, tc := range tests {
		if got := ToolName(tc.server, tc.tool); got != tc.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", tc.server, tc.tool, got, tc.want)
		}
	}
}

func TestObjectSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema any
		want   string
	}{
		{"none", nil, `{"properties":{},"type":"object"}`},
		{"an object schema is kept", map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}},
			`{"properties":{"q":{"type":"string"}},"required":["q"],"type":"object"}`},
		{"a missing type is added", map[string]any{"properties": map[string]any{}}, `{"properties":{},"type":"object"}`},
		{"a schema that is not an object", json.RawMessage(`"string"`), `{"properties":{},"type":"object"}`},
		{"raw JSON", json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}}}`), `{"properties":{"n":{"type":"number"}},"type":"object"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := string(objectSchema(tc.schema)); got != tc.want {
				t.Errorf("objectSchema = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRenderResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		res  *sdk.CallToolResult
		want string
	}{
		{"text parts joined", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, "a\nb"},
		{"an image is described", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 12)}}}, "[image: image/png, 12 bytes]"},
		{"audio is described", &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{Data: []byte("x")}}}, "[audio: unknown type, 1 bytes]"},
		{"a resource link", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{Name: "readme", URI: "file:///r"}}}, "[resource link: readme file:///r]"},
		{"an embedded text resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://x", Text: "body"}}}}, "[resource mem://x]\nbody"},
		{"an embedded blob", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://b", MIMEType: "application/zip", Blob: []byte("zz")}}}}, "[resource mem://b: application/zip, 2 bytes]"},
		{"structured content alone", &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}}, `{"n":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := renderResult(tc.res); got != tc.want {
				t.Errorf("renderResult = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPipeBuffer(t *testing.T) {
	t.Parallel()
	t.Run("data then EOF after the writer ends", func(t *testing.T) {
		t.Parallel()
		b := newPipeBuffer(64)
		if _, err := b.Write([]byte("hello ")); err != nil {
			t.Fatal(err)
		}
		b.Write([]byte("world"))
		b.closeWrite()
		var sb strings.Builder
		buf := make([]byte, 4)
		for {
			n, err := b.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if sb.String() != "hello world" {
			t.Errorf("read %q", sb.String())
		}
	})
	t.Run("a blocked Read returns on Close", func(t *testing.T) {
		t.Parallel()
		b := newPipeBuffer(64)
		got := make(chan error)
		go func() {
			_, err := b.Read(make([]byte, 8))
			got <- err
		}()
		b.Close()
		if err := <-got; err == nil {
			t.Error("Read after Close returned no error")
		}
	})
	t.Run("a writer over the bound fails instead of blocking", func(t *testing.T) {
		t.Parallel()
		b := newPipeBuffer(8)
		if _, err := b.Write([]byte("123456789")); err == nil {
			t.Fatal("no error past the bound")
		}
		if _, err := b.Read(make([]byte, 8)); err == nil {
			t.Error("the reader does not see the overflow")
		}
	})
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{max: 5}
	b.Write([]byte("abc"))
	b.Write([]byte("defg"))
	if b.String() != "cdefg" {
		t.Errorf("tail %q", b.String())
	}
}
