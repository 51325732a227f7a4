package trust

import (
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
)

// The image asks are planned by the backend, found by name as in shiro.
func init() { sandbox.Register(docker.Backend()) }
