package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/crypto/bcrypt"

	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/regauth"
)

// authRegistry starts Debian's docker-registry on 127.0.0.1 (an address
// the engine treats as insecure, so plain HTTP) with htpasswd auth for
// user and password, and returns its host:port.
func authRegistry(t *testing.T, user, password string) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Fatalf("docker-registry is missing (make deps installs it): %v", err)
	}
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"htpasswd": user + ":" + string(hash) + "\n"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	config := fmt.Sprintf("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\nauth:\n  htpasswd:\n    realm: test\n    path: %s\n",
		filepath.Join(dir, "data"), addr, filepath.Join(dir, "htpasswd"))
	writeFiles(t, dir, map[string]string{"config.yml": config})
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusUnauthorized {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry on %s did not answer: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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
	reg := authRegistry(t, "alice", password)

	// Push the sandbox image to it, then drop the local tag.
	ref := reg + "/shiro-test/base:1"
	if _, err := api.ImageTag(ctx, client.ImageTagOptions{Source: base, Target: ref}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{}) })
	authJSON, _ := json.Marshal(map[string]string{"username": "alice", "password": password, "serveraddress": reg})
	push, err := api.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: base64.URLEncoding.EncodeToString(authJSON)})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(push)
	push.Close()
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("push: %s", out)
	}
	if _, err := api.ImageRemove(ctx, ref, client.ImageRemoveOptions{}); err != nil {
		t.Fatal(err)
	}

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
