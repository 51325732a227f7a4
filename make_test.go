package shiro_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// On a fresh machine `make run` must build the sandbox image before it
// starts shiro (as `make test` does), or the first prompt fails for want of
// it. make -n prints the recipe without running it.
func TestMakeRunBuildsTheImageFirst(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), "make", "--no-print-directory", "-n", "run").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	// Under `make test` this runs in a sub-make, which may still name
	// its directory: only the recipe's lines count.
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "make[") {
			lines = append(lines, l)
		}
	}
	image := slices.Index(lines, "./bin/shiro image build --if-missing")
	start := slices.Index(lines, "./bin/shiro")
	if image < 0 || start < 0 || image > start || start != len(lines)-1 {
		t.Errorf("make run does not build the missing image before it starts shiro:\n%s", out)
	}
}
