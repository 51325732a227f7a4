// Package mcptest is a small MCP server for tests, built with the same SDK
// as shiro's client. Tests start it on stdio as a child process — the test
// binary itself (ServeIfChild in TestMain, Command for the argv) or the
// static integration/internal/mcpecho binary — or serve it over HTTP.
//
// Its tools: echo returns its text; fail always reports an error result;
// env returns an environment variable; pwd returns the working directory;
// pid returns the process id; block waits until the call is cancelled.
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

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
	return s
}

// Serve serves the test server on stdin and stdout until stdin closes.
func Serve(ctx context.Context) error {
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
