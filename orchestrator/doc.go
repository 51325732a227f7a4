// Package orchestrator assembles a shiro session from its parts: the
// configuration, the sandbox, the tools, and (later) the agent and its
// provider. Front ends (the TUI, headless mode, `shiro tool`) drive it.
package orchestrator
