package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/registrytest"
	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/regauth"
)

// A build whose FROM is an image in a registry that needs a password
// pulls it with the credentials the build's Auth function gives, through
// BuildKit's session or the classic builder's registry-config header; a
// wrong password fails, and the password is in no line and not in the
// error.
func TestBuildKitFromAPrivateRegistry(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	ctx := t.Context()
	password := token(t, "registry-password")
	registry := registrytest.Start(t, registrytest.Options{User: "alice", Password: password})
	reg := registry.Addr
	// The sandbox image there; the local tag is gone, so a build pulls it.
	ref := registrytest.Push(t, api, registry, base, "shiro-test/base:1")

	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	buildKitFile := func(t *testing.T) string {
		return "FROM " + ref + "\nRUN --mount=type=cache,target=/c echo " + token(t, "run") + " > /run.txt\n"
	}
	build := func(t *testing.T, pw, dockerfile string) (string, error) {
		ws := projectWorkspace(t, api)
		writeFiles(t, ws, map[string]string{"Dockerfile": dockerfile})
		w, err := workspace.Open(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var progress strings.Builder
		var asked []string
		_, err = eng.ResolveImage(ctx, docker.ImageRequest{Spec: "Dockerfile", Workspace: ws, Root: w.Root(), Progress: &progress,
			Credentials: func(_ context.Context, host string) (regauth.Credential, regauth.Source, error) {
				asked = append(asked, host)
				if host == reg {
					return regauth.Credential{Username: "alice", Password: pw}, regauth.Source{Found: true}, nil
				}
				return regauth.Credential{}, regauth.Source{}, nil
			}})
		if !strings.Contains(strings.Join(asked, " "), reg) {
			t.Errorf("the credentials function was asked for %v, not %s", asked, reg)
		}
		return progress.String(), err
	}
	t.Run("the right password", func(t *testing.T) {
		progress, err := build(t, password, buildKitFile(t))
		if err != nil {
			t.Fatalf("build: %v\n%s", err, progress)
		}
		mustContain(t, "the progress", progress, "building with BuildKit", "FROM "+ref)
		if strings.Contains(progress, password) {
			t.Errorf("the password is in the progress:\n%s", progress)
		}
	})
	t.Run("a wrong password", func(t *testing.T) {
		wrong := token(t, "wrong-password")
		progress, err := build(t, wrong, buildKitFile(t))
		if err == nil {
			t.Fatalf("built with a wrong password:\n%s", progress)
		}
		if s := err.Error() + progress; strings.Contains(s, wrong) || strings.Contains(s, password) {
			t.Errorf("a password is shown: %v\n%s", err, progress)
		}
		mustContain(t, "the error", err.Error(), reg)
	})
	// Last: the classic builder's pull leaves the image in the engine.
	t.Run("the classic builder gets them in its registry-config header", func(t *testing.T) {
		progress, err := build(t, password, "FROM "+ref+"\nRUN echo "+token(t, "run")+" > /run.txt\n")
		if err != nil {
			t.Fatalf("build: %v\n%s", err, progress)
		}
		mustContain(t, "the progress", progress, ": FROM "+ref, "Pulling from shiro-test/base")
		if strings.Contains(progress, password) {
			t.Errorf("the password is in the progress:\n%s", progress)
		}
	})
}
