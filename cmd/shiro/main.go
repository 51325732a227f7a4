// Command shiro is a terminal coding agent whose tools run in a container.
package main

import (
	"os"

	"github.com/shiroagent/shiro/cmd/shiro/cli"
)

func main() { os.Exit(cli.Main()) }
