package sandboxtest_test

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fake       sandboxtest.Fake
		wantOut    string
		wantErr    string
		wantCode   int
		wantClosed error
	}{
		{name: "reply writes both streams", fake: sandboxtest.Fake{RunFunc: sandboxtest.Reply("out", "err", 3)}, wantOut: "out|err", wantCode: 3},
		{name: "run without RunFunc fails", wantErr: "RunFunc is not set"},
		{name: "close calls CloseFunc", fake: sandboxtest.Fake{RunFunc: sandboxtest.Reply("", "", 0), CloseFunc: func() error { return sandbox.ErrClosed }}, wantOut: "|", wantClosed: sandbox.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errb strings.Builder
			res, err := tt.fake.Run(t.Context(), sandbox.Command{Shell: "x", Stdout: &out, Stderr: &errb})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Run error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := out.String() + "|" + errb.String(); got != tt.wantOut || res.ExitCode != tt.wantCode {
				t.Errorf("Run = %q, exit %d; want %q, exit %d", got, res.ExitCode, tt.wantOut, tt.wantCode)
			}
			if err := tt.fake.Close(); !errors.Is(err, tt.wantClosed) {
				t.Errorf("Close = %v, want %v", err, tt.wantClosed)
			}
		})
	}
}
