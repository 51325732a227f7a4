package helper

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Runners in these tests start this binary as their reaper.
	if code, ok := ReapMain(); ok {
		os.Exit(code)
	}
	if mode := os.Getenv(initTestEnv); mode != "" {
		os.Exit(initTestChild(mode))
	}
	if len(os.Args) == 4 && os.Args[1] == "serve" && os.Args[2] == "--session" {
		os.Exit(serveTestChild(os.Args[3]))
	}
	goleak.VerifyTestMain(m)
}
