package cli

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/tools/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfChild() // the doctor's MCP check starts this binary as a server
	goleak.VerifyTestMain(m)
}
