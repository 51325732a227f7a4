package tools

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox/local"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

// bashEnv is a workspace whose commands run on this machine (the local
// sandbox: real processes, no container).
func bashEnv(t *testing.T) *Env {
	t.Helper()
	env := newTestEnv(t, nil)
	sb, err := local.New(env.Workspace, local.WithEnv(sandboxtest.HostEnv(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	env.Sandbox = sb
	return env
}

func TestBashSaysHowTheCommandEnded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		command  string
		timeout  int
		want     Exit
		wantText []string
	}{
		{"success", "echo hi", 0, Exit{Code: 0}, []string{"exit: 0", "hi"}},
		{"non-zero exit", "echo oops >&2; exit 3", 0, Exit{Code: 3}, []string{"exit: 3", "stderr:\noops"}},
		{"timeout", "sleep 30", 1000, Exit{Code: 137, TimedOut: true, Signal: "SIGKILL"}, []string{"timeout is 1000ms"}},
		{"killed by a signal", "kill -TERM $$", 0, Exit{Code: 143, Killed: true, Signal: "SIGTERM"}, []string{"killed by SIGTERM"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := map[string]any{"command": tt.command}
			if tt.timeout > 0 {
				in["timeout"] = tt.timeout
			}
			res := call(t, NewBash(), bashEnv(t), jsonInput(t, in))
			if res.Exit == nil || *res.Exit != tt.want {
				t.Errorf("exit %+v, want %+v", res.Exit, tt.want)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(res.Text, w) {
					t.Errorf("result lacks %q:\n%s", w, res.Text)
				}
			}
		})
	}
}

func TestBashDescribesBinaryOutput(t *testing.T) {
	t.Parallel()
	// 3000 bytes of every value, then a line of text.
	var bin strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&bin, `\%03o`, i*7%256)
	}
	cmd := "echo before; printf '" + bin.String() + "'; printf '\\nafter\\n'"
	res := call(t, NewBash(), bashEnv(t), jsonInput(t, map[string]any{"command": cmd}))
	if !strings.Contains(res.Text, "before\n<binary output, 3001 bytes>\nafter") {
		t.Errorf("result:\n%q", res.Text)
	}
	if strings.ContainsRune(res.Text, '\uFFFD') || strings.ContainsRune(res.Text, 0) {
		t.Errorf("binary bytes reached the result: %q", res.Text)
	}
}
