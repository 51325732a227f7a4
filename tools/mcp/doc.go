// Package mcp connects shiro to MCP servers and offers their tools to the
// model as tools.Tool values named mcp__<server>__<tool>.
//
// Servers come from the mcpServers key of the user's config and of the
// project's .shiro/config.json. Where each runs:
//
//   - a stdio server from the user's config runs on the host (the user chose
//     it), with the host's environment and the workspace as its directory;
//   - a stdio server from the project's config runs inside the sandbox, over
//     the session's command channel (a repository must not start programs
//     on the host);
//   - a remote server (streamable HTTP or SSE) from the user's config is
//     reached from the host; one from the project's config is refused, so
//     that an untrusted repository cannot aim the host at internal services
//     (docs/decisions/0005-project-mcp-servers.md).
//
// Each server gets a client of its own, which speaks protocol version
// 2025-11-25 (so that a server may ask while it handles a call), tells it
// the workspace as its root and, through Options.Sample and Options.Elicit,
// answers its sampling and elicitation requests.
//
// A Manager connects every server in parallel, each within a timeout, and
// records per server its tools or why it failed: a server that cannot start
// is a recorded failure, never a crash or a hang. The package is the only
// user of the MCP SDK.
package mcp
