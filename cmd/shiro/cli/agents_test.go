package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParseAge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "7d", want: 7 * 24 * time.Hour},
		{in: "2w", want: 14 * 24 * time.Hour},
		{in: "36h", want: 36 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "2w1d", want: 15 * 24 * time.Hour},
		{in: "90m", want: 90 * time.Minute},
		{in: "0d", bad: true},
		{in: "", bad: true},
		{in: "seven days", bad: true},
		{in: "-3d", bad: true},
		{in: "1d2w", bad: true},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseAge(c.in)
			if c.bad != (err != nil) || got != c.want {
				t.Errorf("parseAge(%q) = %v, %v", c.in, got, err)
			}
		})
	}
}

// TestAgentsOutsideARepository: shiro agents says where it works.
func TestAgentsOutsideARepository(t *testing.T) {
	t.Parallel()
	dir, home := t.TempDir(), t.TempDir()
	var out, errb bytes.Buffer
	f := &Factory{Out: &out, ErrOut: &errb, Getwd: func() (string, error) { return dir, nil },
		LookupEnv: func(k string) (string, bool) {
			if k == "SHIRO_HOME" {
				return home, true
			}
			return "", false
		}}
	for _, args := range [][]string{{"agents"}, {"agents", "merge", "x"}, {"agents", "prune"}} {
		root := NewCmdRoot(f)
		root.SetArgs(args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "shiro agents works in a git checkout") {
			t.Errorf("%v: %v", args, err)
		}
	}
}
