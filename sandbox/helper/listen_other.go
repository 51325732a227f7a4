//go:build !linux

package helper

import (
	"errors"

	"github.com/shiroagent/shiro/sandbox"
)

// ListListeners needs Linux's /proc.
func ListListeners() ([]sandbox.Listener, error) {
	return nil, errors.ErrUnsupported
}
