// Command mcpecho is the MCP server of the integration tests (see
// tools/mcp/mcptest for its tools), built static so that it also runs
// inside the sandbox container. It serves on stdin and stdout.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/shiroagent/shiro/tools/mcp/mcptest"
)

func main() {
	if err := mcptest.Serve(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "mcpecho:", err)
		os.Exit(1)
	}
}
