// Command shiro-helper is the in-container side of shiro's sandbox: the
// container's init, a session's command channel, the reaper every command
// runs under, the kill, the git boundary's export and import, and copy
// mode's file tools and transfers (tools/copymode). It is
// small (no model SDKs, no chat UI) so that copying it into a new
// container, and starting a reaper, cost little; shiro copies it from
// beside its own binary, and falls back to itself (`shiro helper ...`
// does the same) when it is missing.
package main

import (
	"os"

	"github.com/shiroagent/shiro/tools/copymode"
)

func main() { os.Exit(copymode.HelperMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
