//go:build !linux

package docker

import "errors"

// pidfds is Linux's: elsewhere the container is killed instead of frozen
// and cleared (the engine runs in a VM whose processes are not this
// machine's anyway).
type pidfds struct{}

func (pidfds) open(string, []int) (victims, error) { return nil, errors.ErrUnsupported }
