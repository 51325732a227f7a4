// Package mcptest is a small MCP server for tests, built with the same SDK
// as shiro's client. Tests start it on stdio as a child process — the test
// binary itself (ServeIfChild in TestMain, Command for the argv) or the
// static integration/internal/mcpecho binary — or serve it over HTTP.
//
// Its tools: echo returns its text; fail always reports an error result;
// env returns an environment variable; pwd returns the working directory;
// pid returns the process id; block waits until the call is cancelled.
// The tools that ask the client, as the SDK's own example servers do, in
// the middle of the call: roots lists the client's roots; sample asks the
// client's model; elicit asks the user for a form. roots_mrtr asks for the
// roots the newer way, by returning the question in its result (the
// multi-round-trip form).
//
// ModeEnv makes Serve misbehave instead: crash, garbage or hang.
package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ChildEnv, set to "1" in a test binary's environment, makes ServeIfChild
// serve on stdio instead of running the tests.
const ChildEnv = "SHIRO_MCPTEST_SERVE"

// FailText is the error text of the fail tool.
const FailText = "this tool always fails"

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to return"`
}

type envArgs struct {
	Name string `json:"name" jsonschema:"the variable's name"`
}

type noArgs struct{}

type sampleArgs struct {
	Prompt string `json:"prompt" jsonschema:"what to ask the model"`
	System string `json:"system,omitempty" jsonschema:"the system prompt"`
}

// ModeEnv, in the server's environment, makes Serve misbehave:
//   - "crash": write CrashText to stderr and exit with status 3 at once;
//   - "garbage": write GarbageLine to stdout, then serve;
//   - "hang": read stdin and never answer.
const ModeEnv = "SHIRO_MCPTEST_MODE"

// What the misbehaving modes write.
const (
	CrashText   = "mcptest: cannot read its settings"
	GarbageLine = "mcptest server listening on stdio"
)

// ElicitSchema is the form the elicit tool asks for.
var ElicitSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"name":{"type":"string","description":"your name"},` +
	`"age":{"type":"integer"},` +
	`"color":{"type":"string","enum":["red","green"]},` +
	`"agree":{"type":"boolean"}},` +
	`"required":["name"]}`)

// NewServer returns the test server.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "v0.0.1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text argument."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New(FailText)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Returns an environment variable of the server."},
		func(_ context.Context, _ *mcp.CallToolRequest, in envArgs) (*mcp.CallToolResult, any, error) {
			return text(os.Getenv(in.Name)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pwd", Description: "Returns the server's working directory."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			wd, err := os.Getwd()
			return text(wd), nil, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "Returns the server's process id."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "Waits until the call is cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "roots", Description: "Lists the client's roots."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("listing roots failed: %v", err)
			}
			return text(rootsText(res)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "roots_mrtr", Description: "Lists the client's roots, asking in its result."},
		func(_ context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["roots"].(*mcp.ListRootsResult); ok {
				return text(rootsText(r)), nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "Asks the client's model."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sampleArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				Messages:     []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
				SystemPrompt: in.System,
				MaxTokens:    200,
			})
			if err != nil {
				return nil, nil, fmt.Errorf("sampling failed: %v", err)
			}
			t, _ := res.Content.(*mcp.TextContent)
			if t == nil {
				return nil, nil, fmt.Errorf("sampling answered %T", res.Content)
			}
			return text(fmt.Sprintf("model %s said: %s", res.Model, t.Text)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "Asks the user for a form."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "tell me about you", RequestedSchema: ElicitSchema})
			if err != nil {
				return nil, nil, fmt.Errorf("eliciting failed: %v", err)
			}
			b, _ := json.Marshal(res.Content)
			return text(res.Action + " " + string(b)), nil, nil
		})
	return s
}

func rootsText(r *mcp.ListRootsResult) string {
	var out []string
	for _, root := range r.Roots {
		out = append(out, root.Name+" "+root.URI)
	}
	return "roots: " + strings.Join(out, ", ")
}

// Serve serves the test server on stdin and stdout until stdin closes, or
// misbehaves as ModeEnv says.
func Serve(ctx context.Context) error {
	switch os.Getenv(ModeEnv) {
	case "crash":
		fmt.Fprintln(os.Stderr, CrashText)
		os.Exit(3)
	case "garbage":
		fmt.Println(GarbageLine)
	case "hang":
		_, err := io.Copy(io.Discard, os.Stdin)
		return err
	}
	return NewServer().Run(ctx, &mcp.StdioTransport{})
}

// ServeIfChild serves on stdio and exits when ChildEnv is set; otherwise
// it returns at once. Call it first in TestMain.
func ServeIfChild() {
	if os.Getenv(ChildEnv) != "1" {
		return
	}
	if err := Serve(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Command is the command and environment that start the running test
// binary as the server (its TestMain must call ServeIfChild).
func Command() (command string, env map[string]string) {
	return os.Args[0], map[string]string{ChildEnv: "1"}
}
