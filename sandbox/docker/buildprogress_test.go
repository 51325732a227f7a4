package docker

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
)

// countingWriter is a progress writer that takes the totals too
// (sandbox.TotalWriter); last is the last total.
type countingWriter struct {
	strings.Builder
	last sandbox.Total
}

func (c *countingWriter) Total(t sandbox.Total) { c.last = t }

// The streams in testdata are captured from Debian's Docker 20.10 building
// with version=2: a multi-stage build with a cache mount, the same build
// again (every step cached), and a RUN that fails.
func TestDecodeBuildkitStream(t *testing.T) {
	t.Parallel()
	read := func(t *testing.T, name string) *os.File {
		t.Helper()
		f, err := os.Open("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	t.Run("steps, their output and their times become lines", func(t *testing.T) {
		t.Parallel()
		var out countingWriter
		if err := decodeBuildStream(read(t, "buildkit-stream.json"), &out, nil); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		for _, re := range []string{
			`(?m)^#\d+ \[base 2/2\] RUN --mount=type=cache,target=/cache echo hello`,
			`(?m)^#\d+ hello$`,
			`(?m)^#\d+ \[stage-1 2/2\] COPY --from=base /etc/hostname /h$`,
			`(?m)^#\d+ DONE \d+\.\ds$`,
		} {
			if !regexp.MustCompile(re).MatchString(got) {
				t.Errorf("output lacks %s:\n%s", re, got)
			}
		}
		if strings.Contains(got, "moby.buildkit.trace") {
			t.Errorf("raw trace messages printed:\n%s", got)
		}
		if !out.last.Build || out.last.Of == 0 || out.last.Done != out.last.Of {
			t.Errorf("totals = %+v, want a build's n/n", out.last)
		}
	})
	t.Run("a cached step says CACHED", func(t *testing.T) {
		t.Parallel()
		var out countingWriter
		if err := decodeBuildStream(read(t, "buildkit-stream-cached.json"), &out, nil); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^#(\d+) \[base 2/2\] RUN .*\n(?:.*\n)*#\d+ CACHED$`).MatchString(out.String()) {
			t.Errorf("no CACHED line for the RUN step:\n%s", out.String())
		}
	})
	t.Run("a failed RUN is an error naming its step", func(t *testing.T) {
		t.Parallel()
		var out countingWriter
		err := decodeBuildStream(read(t, "buildkit-stream-fail.json"), &out, nil)
		var be *ImageBuildError
		if !errors.As(err, &be) {
			t.Fatalf("err = %v, want an *ImageBuildError", err)
		}
		if be.Step != "2/2" || be.Instruction != "RUN echo failing-step && exit 3" || !strings.Contains(be.Message, "exit code: 3") {
			t.Errorf("err = %+v", be)
		}
		if !regexp.MustCompile(`(?m)^#\d+ failing-step$`).MatchString(out.String()) {
			t.Errorf("the step's output is missing:\n%s", out.String())
		}
	})
	t.Run("redact hides a value in every line and the error", func(t *testing.T) {
		t.Parallel()
		var out countingWriter
		redact := func(s string) string { return strings.ReplaceAll(s, "failing-step", "****") }
		err := decodeBuildStream(read(t, "buildkit-stream-fail.json"), &out, redact)
		if err == nil || strings.Contains(err.Error(), "failing-step") || strings.Contains(out.String(), "failing-step") {
			t.Errorf("value shown: err %v, output:\n%s", err, out.String())
		}
	})
}
