// Package flock takes advisory locks on files between processes of one
// host (flock(2)); where flock is missing (not a unix system) every
// caller gets the lock.
package flock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"
)

// ErrHeld is TryLock's error when another holder has the lock.
var ErrHeld = errors.New("locked by another process")

// Lock takes an exclusive lock on path (made with its directory if
// missing), waiting until ctx ends; the returned function releases it.
func Lock(ctx context.Context, path string) (func(), error) {
	for wait := time.Millisecond; ; wait = min(wait*2, 50*time.Millisecond) {
		unlock, err := TryLock(path)
		if !errors.Is(err, ErrHeld) {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(wait):
		}
	}
}

// TryLock takes an exclusive lock on path (made with its directory if
// missing) if no one holds it, else fails with ErrHeld at once.
func TryLock(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := tryLock(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// Held reports whether someone holds the lock on path (false when the
// file does not exist).
func Held(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := tryLock(f); err != nil {
		return errors.Is(err, ErrHeld)
	}
	return false // the lock was ours for a moment; Close releases it
}
