package helper

import (
	"io"
	"os"
	"slices"
	"strings"
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

func TestReadEnvLineStopsAtTheLine(t *testing.T) {
	r := strings.NewReader(`["A=1","B=x=y"]` + "\n" + `{"id":1}`)
	env, err := ReadEnvLine(r)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(env, []string{"A=1", "B=x=y"}) {
		t.Errorf("env %q", env)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != `{"id":1}` {
		t.Errorf("the protocol after the line: %q", rest)
	}
	for _, bad := range []string{`["NOEQUALS"]` + "\n", `["=x"]` + "\n", `not json` + "\n", `["A=1"]`} {
		if _, err := ReadEnvLine(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadEnvLine(%q) accepted it", bad)
		}
	}
}
