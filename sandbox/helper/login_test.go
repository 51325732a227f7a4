package helper

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
)

func TestLoginProfileIsReadOncePerSession(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash: %v", err)
	}
	home := t.TempDir()
	count := filepath.Join(home, "profile-runs")
	profile := "echo run >> " + count + "\nexport FROM_PROFILE=yes\nPATH=/from-profile:$PATH\n"
	if err := os.WriteFile(filepath.Join(home, ".bash_profile"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newTestRunner(t, WithEnv([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}))
	for i := range 3 {
		var out bytes.Buffer
		res, err := r.Run(t.Context(), sandbox.Command{Shell: `echo "$FROM_PROFILE $PATH $OVERRIDE"`, Env: []string{"OVERRIDE=cmd"}, Stdout: &out})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
		got := strings.TrimSpace(out.String())
		if !strings.HasPrefix(got, "yes /from-profile:") || !strings.HasSuffix(got, " cmd") {
			t.Errorf("run %d printed %q, want the profile's variable and PATH and the command's own variable", i, got)
		}
	}
	b, err := os.ReadFile(count)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "run"); n != 1 {
		t.Errorf("the login profile ran %d times for 3 commands, want once per session", n)
	}
}

func TestParseEnv0(t *testing.T) {
	t.Parallel()
	out := []byte("PATH=/bin\x00PWD=/x\x00SHLVL=2\x00_=/usr/bin/env\x00A=b=c\x00" + sandbox.MarkerEnv + "=s.1\x00")
	got := parseEnv0(out)
	if want := []string{"PATH=/bin", "A=b=c"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("parseEnv0 = %q, want %q", got, want)
	}
	if got := parseEnv0([]byte("A=b\x00")); got != nil {
		t.Errorf("without PATH: %q, want nil (fall back to bash -lc)", got)
	}
}
