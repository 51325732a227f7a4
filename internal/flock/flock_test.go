//go:build unix

package flock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestLockExcludesUntilReleased(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d", "x.lock")
	if Held(p) {
		t.Fatal("a missing lock file is held")
	}
	unlock, err := Lock(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !Held(p) {
		t.Error("Held: false while locked")
	}
	if _, err := TryLock(p); !errors.Is(err, ErrHeld) {
		t.Errorf("TryLock while held: %v, want ErrHeld", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock while held: %v, want the context's end", err)
	}
	unlock()
	if Held(p) {
		t.Error("Held: true after release")
	}
	unlock2, err := TryLock(p)
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	unlock2()
}
