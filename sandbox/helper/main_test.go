package helper

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(initTestEnv); mode != "" {
		os.Exit(initTestChild(mode))
	}
	goleak.VerifyTestMain(m)
}
