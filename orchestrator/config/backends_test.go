package config

import (
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/kube"
)

// sandbox.backend takes the registered backends' names, as in shiro.
func init() {
	sandbox.Register(docker.Backend())
	sandbox.Register(kube.Backend())
}
