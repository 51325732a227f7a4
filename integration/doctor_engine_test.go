package integration

import (
	"os"
	"strings"
	"testing"
)

// A user outside the socket's group: the engine runs, but refuses them.
// shiro doctor says so, and how to join the group, instead of "start
// Docker".
func TestDoctorNamesPermissionDeniedOnTheSocket(t *testing.T) {
	t.Parallel()
	if h := os.Getenv("DOCKER_HOST"); h != "" && !strings.HasPrefix(h, "unix://") {
		t.Fatalf("this test needs the engine's local socket, DOCKER_HOST is %s", h)
	}
	h := newHostile(t)
	h.groups = nil // not in the docker group
	ws := h.workspace("ws")
	res := h.shiro(ws, []string{"SHIRO_BASE_URL=http://127.0.0.1:1"}, "doctor", "--no-mcp")
	var engine string
	for line := range strings.Lines(res.stdout) {
		if strings.HasPrefix(line, "✗ engine") {
			engine = line
		}
	}
	if res.code != 1 || !strings.Contains(engine, "permission denied on the socket") ||
		!strings.Contains(engine, "usermod -aG docker") || strings.Contains(engine, "start Docker") {
		t.Errorf("exit %d, the engine line %q:\n%s%s", res.code, engine, res.stdout, res.stderr)
	}
}
