// Package integration holds shiro's end-to-end tests: the real binary, the
// real Docker engine, real git and ripgrep, and (later) fake model servers
// and tmux driving the terminal UI.
package integration
