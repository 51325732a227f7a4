// Package sessiontools holds the tools that belong to a session rather than
// to a tool set: todo_write (the task list), remember, recall and forget
// (durable per-project memory), skill (Markdown instructions loaded on
// demand) and task (a read-only subagent with a fresh context). None of
// them is gated; the orchestrator offers them beside the built-in tools and
// auto-approves them, and reads their state (task list, memory block,
// skills catalogue) into the system prompt.
package sessiontools
