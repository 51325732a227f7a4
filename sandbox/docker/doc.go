// Package docker runs shiro's sandbox in a Docker container: one container
// per workspace (reused across sessions, replaced when its settings change),
// the workspace bind-mounted at the same absolute path, and one long-lived
// exec of the in-container helper per session carrying every command.
//
// It is the only package that talks to the Docker Engine API.
package docker
