package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/registrytest"
	"github.com/shiroagent/shiro/integration/testenv"
)

// A tag that moved on its registry is reported at start, in the
// background; the sandbox keeps the image its container was made from
// until --pull; a project pinned by digest runs that digest and is not
// told; with the registry gone the start works and says nothing.
func TestPinningTagMoves(t *testing.T) {
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	reg := registrytest.Start(t, registrytest.Options{})

	// Image A is the sandbox image, image B the same with a label more.
	ref := registrytest.Push(t, api, reg, base, "pin/dev:t")
	imgB := buildLabelled(t, api, base)
	ws := testenv.Workspace(t, api)

	// The first start pulls the tag: A.
	res := shiro(t, ws, nil, "--image", ref, "tool", "bash", bashJSON("true", 0))
	if res.code != 0 {
		t.Fatalf("first start: exit %d\n%s", res.code, res.stderr)
	}
	idA, digestA := localImage(t, api, ref)
	repo, _, _ := strings.Cut(ref, ":t")
	t.Cleanup(func() { untagDigests(api, repo) })
	if got := containerImages(t, api, ws); len(got) != 1 || got[0] != idA {
		t.Fatalf("the first start's containers run %v, want A %s", got, idA)
	}

	// B is pushed as the same tag; the engine keeps A under it.
	registrytest.Push(t, api, reg, imgB, "pin/dev:t")
	if _, err := api.ImageTag(t.Context(), client.ImageTagOptions{Source: idA, Target: ref}); err != nil {
		t.Fatal(err)
	}

	t.Run("the move is reported and A still runs", func(t *testing.T) {
		r := startShiro(t, ws, "--image", ref, "tool", "bash", bashJSON("sleep 60", 0))
		r.waitLine(t, "moved on its registry: the sandbox runs "+short(digestA), 2*time.Minute)
		if code, _ := r.signalAndWait(t, syscall.SIGINT); code == 0 {
			t.Logf("exit %d after the interrupt", code)
		}
		if got := containerImages(t, api, ws); len(got) != 1 || got[0] != idA {
			t.Errorf("without --pull the containers run %v, want A %s", got, idA)
		}
	})

	t.Run("--pull takes B", func(t *testing.T) {
		res := shiro(t, ws, nil, "--image", ref, "--pull", "tool", "bash", bashJSON("true", 0))
		if res.code != 0 {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		idB, _ := localImage(t, api, ref)
		if idB == idA {
			t.Fatalf("--pull left %s on A", ref)
		}
		if got := containerImages(t, api, ws); !slices.Contains(got, idB) {
			t.Errorf("after --pull the containers run %v, want B %s among them", got, idB)
		}
	})

	t.Run("image ls names each image's digest and workspaces", func(t *testing.T) {
		res := shiro(t, ws, nil, "image", "ls", "--json")
		if res.code != 0 {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		var list []struct {
			Ref, Digest, ID string
			Workspaces      []string
		}
		if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
			t.Fatalf("%v\n%s", err, res.stdout)
		}
		found := map[string]bool{}
		for _, e := range list {
			if slices.Contains(e.Workspaces, ws) {
				found[e.ID] = true
				if e.Ref != ref || !strings.HasPrefix(e.Digest, "sha256:") || e.Digest == e.ID {
					t.Errorf("the workspace's image %+v: want %s by its registry digest", e, ref)
				}
			}
		}
		if !found[idA] || len(found) != 2 {
			t.Errorf("image ls gives the workspace's images %v, want A and B:\n%s", found, res.stdout)
		}
	})

	t.Run("a project pinned by digest runs it and ignores the move", func(t *testing.T) {
		pws := testenv.Workspace(t, api)
		pinnedRef := repo + "@" + digestA
		if err := os.MkdirAll(filepath.Join(pws, ".shiro"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := `{"sandbox": {"image": "` + pinnedRef + `"}}`
		if err := os.WriteFile(filepath.Join(pws, ".shiro", "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		res := shiro(t, pws, nil, "--trust-project", "tool", "bash", bashJSON("true", 0))
		if res.code != 0 {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		if strings.Contains(res.stderr, "moved") {
			t.Errorf("a pinned project was told of the move:\n%s", res.stderr)
		}
		if got := containerImages(t, api, pws); len(got) != 1 || got[0] != idA {
			t.Errorf("the pinned project runs %v, want A %s", got, idA)
		}
	})

	t.Run("with the registry stopped the start says nothing", func(t *testing.T) {
		if _, err := api.ImageTag(t.Context(), client.ImageTagOptions{Source: idA, Target: ref}); err != nil {
			t.Fatal(err)
		}
		reg.Stop()
		res := shiro(t, ws, nil, "--image", ref, "tool", "bash", bashJSON("true", 0))
		if res.code != 0 {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		if strings.Contains(res.stderr, "moved") || strings.Contains(res.stderr, "registry") {
			t.Errorf("an offline check said something:\n%s", res.stderr)
		}
	})

	// A registry that accepts and never answers: the command runs while
	// the check still waits for it. Had the start waited for the check,
	// the command would run no sooner than the check's timeout (3 s) after
	// the engine dialled the registry.
	t.Run("a registry that never answers does not hold the start", func(t *testing.T) {
		ln, err := net.Listen("tcp", reg.Addr)
		if err != nil {
			t.Fatalf("listen where the registry was: %v", err)
		}
		defer ln.Close()
		ran := filepath.Join(ws, "ran")
		dialled := make(chan time.Time, 1)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				select {
				case dialled <- time.Now():
				default:
				}
				go func() {
					defer c.Close()
					_, _ = io.Copy(io.Discard, c) // never answered
				}()
			}
		}()
		res := shiro(t, ws, nil, "--image", ref, "tool", "bash", bashJSON("touch "+ran, 0))
		if res.code != 0 {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		fi, err := os.Stat(ran)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-dialled:
			if wait := fi.ModTime().Sub(at); wait >= 3*time.Second {
				t.Errorf("the command ran %s after the registry was dialled: the start waited for the check", wait)
			}
		default:
			t.Fatal("the engine never asked the registry: nothing was checked")
		}
		if strings.Contains(res.stderr, "moved") {
			t.Errorf("a check without an answer said something:\n%s", res.stderr)
		}
	})
}

// buildLabelled builds FROM base with one label more and removes the
// image when the test ends.
func buildLabelled(t *testing.T, api *client.Client, base string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	tag := "shiro-pintest:" + hex.EncodeToString(b[:])
	df := []byte("FROM " + base + "\nLABEL dev.shiro.test.pin=" + tag + "\n")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))})
	_, _ = tw.Write(df)
	_ = tw.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := api.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, Version: build.BuilderV1})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	t.Cleanup(func() {
		_, _ = api.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true})
	})
	if _, err := api.ImageInspect(ctx, tag); err != nil {
		t.Fatalf("build %s: %v", tag, err)
	}
	return tag
}

// localImage is the id of the engine's image ref and its repository's
// registry digest.
func localImage(t *testing.T, api *client.Client, ref string) (id, digest string) {
	t.Helper()
	img, err := api.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	repo, _, _ := strings.Cut(ref, ":t")
	for _, rd := range img.RepoDigests {
		if d, ok := strings.CutPrefix(rd, repo+"@"); ok {
			digest = d
		}
	}
	if digest == "" {
		t.Fatalf("%s has no digest of %s: %v", ref, repo, img.RepoDigests)
	}
	return img.ID, digest
}

// containerImages are the image ids the workspace's containers run.
func containerImages(t *testing.T, api *client.Client, ws string) []string {
	t.Helper()
	var out []string
	for _, id := range testenv.ContainerIDs(t, api, ws) {
		c, err := api.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Container.Image)
	}
	return out
}

func short(d string) string { return strings.TrimPrefix(d, "sha256:")[:12] }

// untagDigests removes the digest references of repo the pulls left on
// the engine's images (the images stay while other tags hold them).
func untagDigests(api *client.Client, repo string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := api.ImageList(ctx, client.ImageListOptions{All: true})
	if err != nil {
		return
	}
	for _, img := range list.Items {
		for _, rd := range img.RepoDigests {
			if strings.HasPrefix(rd, repo+"@") {
				_, _ = api.ImageRemove(ctx, rd, client.ImageRemoveOptions{})
			}
		}
	}
}
