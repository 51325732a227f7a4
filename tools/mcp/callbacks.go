package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientProtocol is the protocol version shiro asks for. In the newest
// (2026-07-28) a server may not send a request while it handles a call:
// it returns the questions in its result and the client calls again
// (multi-round-trip requests). Servers written for the versions before it
// (the SDKs' own examples among them) ask roots, sampling and elicitation
// in the middle of the call, and fail on the newest. Under this version
// both kinds work: the callback kind as it is, and the multi-round-trip
// kind through the server SDK's fallback for older clients (or, where a
// server answers with the newest version, through the client's retries).
const clientProtocol = "2025-11-25"

// SampleRequest is a server's sampling request: a completion by the
// session's model.
type SampleRequest struct {
	// Server is the name of the server asking.
	Server string
	// System is the server's system prompt ("" for none).
	System string
	// Messages are the conversation, text only, roles "user" and
	// "assistant".
	Messages []SampleMessage
	// MaxTokens is the most the server wants generated (0: the model's
	// default).
	MaxTokens int
}

// SampleMessage is one message of a sampling request.
type SampleMessage struct {
	Role string
	Text string
}

// SampleResult is the model's answer to a sampling request.
type SampleResult struct {
	Text string
	// Model names the model that answered.
	Model string
	// StopReason is "endTurn" or "maxTokens".
	StopReason string
}

// ElicitRequest is a server's question to the user: a form.
type ElicitRequest struct {
	// Server is the name of the server asking.
	Server string
	// Message is what the server says it wants.
	Message string
	// Fields are the form's fields, the required ones first, each group
	// by name.
	Fields []ElicitField
}

// ElicitField is one field of an elicitation form. Type is "string",
// "number", "integer" or "boolean"; a string with Enum is a choice.
type ElicitField struct {
	Name, Title, Description string
	Type                     string
	Required                 bool
	// Enum are the values a choice allows; EnumNames, when as long, the
	// names they are shown under.
	Enum, EnumNames []string
	// Default is the schema's default, if any.
	Default any
}

// Label is the field's title, else its name.
func (f ElicitField) Label() string {
	if f.Title != "" {
		return f.Title
	}
	return f.Name
}

// The actions an elicitation ends with.
const (
	ElicitAccept  = "accept"
	ElicitDecline = "decline"
	ElicitCancel  = "cancel"
)

// ElicitResult is the user's answer: Action ElicitAccept with Content
// (field name → a string, a float64, an int64 or a bool), or
// ElicitDecline or ElicitCancel without.
type ElicitResult struct {
	Action  string
	Content map[string]any
}

// Errors a sampling or elicitation handler may return; the server sees
// their text.
var (
	// ErrSamplingDenied: the user said no to a sampling request.
	ErrSamplingDenied = errors.New("the user declined the sampling request")
	// ErrSamplingHeadless: nobody can approve a sampling request in this
	// run (headless without --yolo).
	ErrSamplingHeadless = errors.New("no one can approve a sampling request in this run (headless; --yolo allows it)")
)

// Root is the root a server is told of: the workspace, as the path the
// server sees it.
func Root(path string) *sdk.Root {
	return &sdk.Root{URI: (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String(), Name: filepath.Base(path)}
}

// newClient is the client one server is connected with: it tells the
// server root (the workspace as the server sees it) and, when the options
// have them, answers sampling and elicitation.
func (m *Manager) newClient(server, root string) *sdk.Client {
	caps := &sdk.ClientCapabilities{RootsV2: &sdk.RootCapabilities{}}
	opts := &sdk.ClientOptions{Capabilities: caps}
	if sample := m.opts.Sample; sample != nil {
		opts.CreateMessageHandler = func(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return handleSample(ctx, server, req.Params, sample)
		}
	}
	if elicit := m.opts.Elicit; elicit != nil {
		caps.Elicitation = &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}
		opts.ElicitationHandler = func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return handleElicit(ctx, server, req.Params, elicit)
		}
	}
	c := sdk.NewClient(m.impl, opts)
	c.AddRoots(Root(root))
	return c
}

// codeUserRejected is the error code the protocol suggests for a sampling
// request the user rejected.
const codeUserRejected = -1

func handleSample(ctx context.Context, server string, p *sdk.CreateMessageParams, sample func(context.Context, SampleRequest) (SampleResult, error)) (*sdk.CreateMessageResult, error) {
	if p == nil || len(p.Messages) == 0 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the sampling request has no messages"}
	}
	req := SampleRequest{Server: server, System: p.SystemPrompt, MaxTokens: int(p.MaxTokens)}
	for i, m := range p.Messages {
		if m == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("message %d is empty", i+1)}
		}
		text, ok := m.Content.(*sdk.TextContent)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("message %d holds %s content: shiro samples text only", i+1, contentKind(m.Content))}
		}
		if m.Role != "user" && m.Role != "assistant" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("message %d has role %q: want \"user\" or \"assistant\"", i+1, m.Role)}
		}
		req.Messages = append(req.Messages, SampleMessage{Role: string(m.Role), Text: text.Text})
	}
	res, err := sample(ctx, req)
	switch {
	case errors.Is(err, ErrSamplingDenied) || errors.Is(err, ErrSamplingHeadless):
		return nil, &jsonrpc.Error{Code: codeUserRejected, Message: err.Error()}
	case err != nil:
		return nil, err
	}
	return &sdk.CreateMessageResult{
		Content:    &sdk.TextContent{Text: res.Text},
		Model:      res.Model,
		Role:       "assistant",
		StopReason: res.StopReason,
	}, nil
}

func contentKind(c sdk.Content) string {
	switch c.(type) {
	case *sdk.ImageContent:
		return "image"
	case *sdk.AudioContent:
		return "audio"
	case nil:
		return "no"
	default:
		return strings.TrimPrefix(fmt.Sprintf("%T", c), "*mcp.")
	}
}

func handleElicit(ctx context.Context, server string, p *sdk.ElicitParams, elicit func(context.Context, ElicitRequest) (ElicitResult, error)) (*sdk.ElicitResult, error) {
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the elicitation request is empty"}
	}
	if p.Mode == "url" || p.URL != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "shiro answers form elicitations only"}
	}
	fields, err := elicitFields(p.RequestedSchema)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestedSchema: " + err.Error()}
	}
	res, err := elicit(ctx, ElicitRequest{Server: server, Message: p.Message, Fields: fields})
	if err != nil {
		return nil, err
	}
	switch res.Action {
	case ElicitAccept:
		if res.Content == nil {
			res.Content = map[string]any{}
		}
		return &sdk.ElicitResult{Action: ElicitAccept, Content: res.Content}, nil
	case ElicitDecline, ElicitCancel:
		return &sdk.ElicitResult{Action: res.Action}, nil
	default:
		return nil, fmt.Errorf("elicitation answered with action %q", res.Action)
	}
}

// elicitFields reads a form's schema: an object of flat properties of
// the primitive types the protocol allows.
func elicitFields(schema any) ([]ElicitField, error) {
	if schema == nil {
		return nil, nil
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	var s struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type        string   `json:"type"`
			Title       string   `json:"title"`
			Description string   `json:"description"`
			Enum        []any    `json:"enum"`
			EnumNames   []string `json:"enumNames"`
			OneOf       []struct {
				Const any    `json:"const"`
				Title string `json:"title"`
			} `json:"oneOf"`
			Default any `json:"default"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if s.Type != "" && s.Type != "object" {
		return nil, fmt.Errorf("type %q: want an object", s.Type)
	}
	var out []ElicitField
	for name, p := range s.Properties {
		f := ElicitField{Name: name, Title: p.Title, Description: p.Description, Type: p.Type, Required: slices.Contains(s.Required, name), Default: p.Default}
		switch p.Type {
		case "string", "number", "integer", "boolean":
		default:
			return nil, fmt.Errorf("property %q has type %q: want string, number, integer or boolean", name, p.Type)
		}
		for _, v := range p.Enum {
			f.Enum = append(f.Enum, fmt.Sprint(v))
		}
		if len(p.EnumNames) == len(f.Enum) {
			f.EnumNames = p.EnumNames
		}
		if len(f.Enum) == 0 {
			for _, o := range p.OneOf {
				f.Enum = append(f.Enum, fmt.Sprint(o.Const))
				f.EnumNames = append(f.EnumNames, o.Title)
			}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b ElicitField) int {
		if a.Required != b.Required {
			if a.Required {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}
