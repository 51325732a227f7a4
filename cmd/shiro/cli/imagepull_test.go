package cli_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
)

// fakePulls are the references `shiro image pull` asked the fake backend
// for.
var fakePulls struct {
	mu   sync.Mutex
	refs []string
}

func (b *fakeBackend) PullImage(_ context.Context, p sandbox.ImagePull) (string, error) {
	fakePulls.mu.Lock()
	defer fakePulls.mu.Unlock()
	fakePulls.refs = append(fakePulls.refs, p.Ref)
	if strings.HasPrefix(p.Ref, "denied.example.com/") {
		return "", fmt.Errorf("the registry denied.example.com refused access")
	}
	fmt.Fprintf(p.Progress, "pulling %s\n", p.Ref)
	return "sha256:0123", nil
}

func TestImagePullAsksTheBackend(t *testing.T) {
	ws := t.TempDir()
	stdout, stderr, err := run(t, ws, nil, "--backend", fakeName, "image", "pull", "reg.example.com/team/dev:1")
	if err != nil {
		t.Fatalf("image pull: %v\n%s", err, stderr)
	}
	if stdout != "reg.example.com/team/dev:1 sha256:0123\n" || !strings.Contains(stderr, "pulling reg.example.com/team/dev:1") {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	if _, _, err := run(t, ws, nil, "--backend", fakeName, "image", "pull", "denied.example.com/x:1"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a refused pull: %v", err)
	}
	if _, _, err := run(t, ws, nil, "--backend", fakeName, "image", "pull"); err == nil {
		t.Error("pull without a reference worked")
	}
	fakePulls.mu.Lock()
	defer fakePulls.mu.Unlock()
	if strings.Join(fakePulls.refs, " ") != "reg.example.com/team/dev:1 denied.example.com/x:1" {
		t.Errorf("pulled %q", fakePulls.refs)
	}
}

func TestImagePullOnABackendThatDoesNotPull(t *testing.T) {
	_, _, err := run(t, t.TempDir(), nil, "--backend", sandbox.BackendKubernetes, "image", "pull", "x:1")
	if err == nil || !strings.Contains(err.Error(), "pulls no images itself") {
		t.Errorf("err = %v", err)
	}
}

func TestImagePullSecretReachesTheBackend(t *testing.T) {
	ws := t.TempDir()
	// The fake's doctor fails one check of its own: the exit is not the
	// point, what the backend was given is.
	_, _, _ = run(t, ws, nil, "--backend", fakeName, "--network", "none", "--image-pull-secret", "team-registry", "doctor", "--no-mcp")
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.doctor) == 0 || fake.doctor[len(fake.doctor)-1].ImagePullSecret != "team-registry" {
		t.Errorf("the backend got %+v", fake.doctor)
	}
}
