//go:build !linux

package helper

import (
	"context"
	"errors"
	"fmt"
)

// Init is the container's PID 1; it needs Linux.
func Init(ctx context.Context, opts InitOptions) error {
	return fmt.Errorf("init: %w", errors.ErrUnsupported)
}

// NotifyInit is Linux's (the container's init); elsewhere it does nothing.
func NotifyInit() {}
