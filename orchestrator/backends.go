package orchestrator

import (
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/kube"
)

// The sandbox backends shiro has: a new one is a package and a line here.
func init() {
	sandbox.Register(docker.Backend())
	sandbox.Register(kube.Backend())
}
