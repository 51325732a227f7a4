package docker

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/moby/buildkit/session/auth"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox"
)

func TestScanDockerfile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		df   string
		want dockerfileFeatures
	}{
		{"a plain Dockerfile has none", "FROM x\nRUN echo '<<not a heredoc' # <<\nCOPY a b\n", dockerfileFeatures{}},
		{"a cache mount", "FROM x\nRUN --mount=type=cache,target=/c make\n", dockerfileFeatures{Mount: true}},
		{"a mount on a continuation line", "FROM x\nRUN --network=none \\\n    --mount=type=secret,id=tok make\n", dockerfileFeatures{Mount: true}},
		{"a heredoc in RUN", "FROM x\nRUN <<EOF\necho hi\nEOF\n", dockerfileFeatures{Heredoc: true}},
		{"a quoted heredoc in COPY", "FROM x\nCOPY <<-\"END\" /etc/x\nEND\n", dockerfileFeatures{Heredoc: true}},
		{"COPY --link", "FROM x\ncopy --link --from=b /a /a\n", dockerfileFeatures{Link: true}},
		{"--link after the sources is not a flag", "FROM x\nCOPY a --link\n", dockerfileFeatures{}},
		{"a syntax directive", "# syntax=docker/dockerfile:1.7\nFROM x\n", dockerfileFeatures{Syntax: "docker/dockerfile:1.7"}},
		{"a syntax directive after another directive", "# escape=\\\n#syntax = d/f:1\nFROM x\n", dockerfileFeatures{Syntax: "d/f:1"}},
		{"a syntax comment after the first instruction is a comment", "FROM x\n# syntax=d/f:1\n", dockerfileFeatures{}},
		{"a syntax comment after a comment is a comment", "# hello\n# syntax=d/f:1\nFROM x\n", dockerfileFeatures{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := scanDockerfile([]byte(tt.df)); got != tt.want {
				t.Errorf("scanDockerfile() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDockerfileFeaturesCheck(t *testing.T) {
	t.Parallel()
	old := builderKind{buildkit: true, oldFrontend: true}
	t.Run("a heredoc on the old frontend is refused, saying why", func(t *testing.T) {
		t.Parallel()
		_, err := dockerfileFeatures{Heredoc: true}.check(old)
		if !errors.Is(err, ErrDockerfileFeature) || !strings.Contains(err.Error(), "heredocs") || !strings.Contains(err.Error(), "Docker 20.10") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("a syntax line is refused on any builder", func(t *testing.T) {
		t.Parallel()
		_, err := dockerfileFeatures{Syntax: "docker/dockerfile:1"}.check(builderKind{buildkit: true})
		if !errors.Is(err, ErrDockerfileFeature) || !strings.Contains(err.Error(), "pull") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("mounts build on BuildKit", func(t *testing.T) {
		t.Parallel()
		if n, err := (dockerfileFeatures{Mount: true}).check(old); n != "" || err != nil {
			t.Errorf("check() = %q, %v", n, err)
		}
	})
	t.Run("the classic builder gets a notice naming what fails", func(t *testing.T) {
		t.Parallel()
		n, err := dockerfileFeatures{Mount: true, Heredoc: true}.check(builderKind{})
		if err != nil || !strings.Contains(n, "RUN --mount") || !strings.Contains(n, "heredocs") || !strings.Contains(n, "no BuildKit") {
			t.Errorf("check() = %q, %v", n, err)
		}
	})
}

func TestAuthProvider(t *testing.T) {
	t.Parallel()
	var asked []string
	p := authProvider{creds: func(host string) (string, string, error) {
		asked = append(asked, host)
		if host == "registry.test" {
			return "alice", "s3cret", nil
		}
		return "", "", nil
	}}
	res, err := p.Credentials(t.Context(), &auth.CredentialsRequest{Host: "registry.test"})
	if err != nil || res.Username != "alice" || res.Secret != "s3cret" {
		t.Errorf("Credentials(registry.test) = %v, %v", res, err)
	}
	res, err = p.Credentials(t.Context(), &auth.CredentialsRequest{Host: "other.test"})
	if err != nil || res.Username != "" || res.Secret != "" {
		t.Errorf("Credentials(other.test) = %v, %v", res, err)
	}
	if strings.Join(asked, " ") != "registry.test other.test" {
		t.Errorf("asked %v", asked)
	}
	res, err = p.Credentials(t.Context(), &auth.CredentialsRequest{Host: "registry-1.docker.io"})
	if err != nil || asked[len(asked)-1] != "docker.io" {
		t.Errorf("Docker Hub asked as %v: %v, %v", asked, res, err)
	}
	tok := authProvider{creds: func(string) (string, string, error) { return "<token>", "idtok", nil }}
	if res, err := tok.Credentials(t.Context(), &auth.CredentialsRequest{Host: "r.test"}); err != nil || res.Username != "" || res.Secret != "idtok" {
		t.Errorf("identity token: %v, %v", res, err)
	}
	res, err = authProvider{}.Credentials(t.Context(), &auth.CredentialsRequest{Host: "registry.test"})
	if err != nil || res.Username != "" {
		t.Errorf("no creds func: %v, %v", res, err)
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := redactor(map[string][]byte{"a": []byte("tok-123\n"), "b": []byte("tok-123-long")})
	if got := r("x tok-123-long y tok-123 z"); got != "x **** y **** z" {
		t.Errorf("redact = %q", got)
	}
	if redactor(map[string][]byte{"a": []byte("  ")}) != nil {
		t.Error("a blank secret makes a redactor")
	}
}

// buildkitEngine is a fake engine whose ping says BuildKit (Docker
// 20.10's API) and whose /session endpoint is not there.
type buildkitEngine struct{ *fakeEngine }

func (buildkitEngine) Ping(context.Context, client.PingOptions) (client.PingResult, error) {
	return client.PingResult{APIVersion: "1.41", OSType: "linux"}, nil
}

func (buildkitEngine) DialHijack(context.Context, string, string, map[string][]string) (net.Conn, error) {
	return nil, errors.New("no session endpoint in the fake")
}

func TestResolveDockerfileBuildsWithBuildKit(t *testing.T) {
	t.Parallel()
	stream, err := os.ReadFile("testdata/buildkit-stream.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a build asks for BuildKit with a session, and its totals reach the caller", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		writeTree(t, ws, map[string]string{"Dockerfile": "FROM x AS base\nRUN --mount=type=cache,target=/c true\nFROM x\nCOPY --from=base /a /a\n"})
		eng := buildkitEngine{newFakeEngine()}
		eng.buildOut, eng.tagOnError = string(stream), true
		var progress countingWriter
		req := ImageRequest{Spec: "Dockerfile", Workspace: ws, Root: openRoot(t, ws), Progress: &progress,
			Secrets: []sandbox.BuildSecret{{ID: "tok", Env: "TOK"}}, LookupEnv: func(string) (string, bool) { return "v", true }}
		if _, err := resolveImage(t.Context(), eng, req, &imageBuilds{}); err != nil {
			t.Fatal(err)
		}
		b := eng.builds[0]
		if b.Version != build.BuilderBuildKit || b.SessionID == "" || b.NetworkMode != "none" {
			t.Errorf("build options: version %q, session %q, network %q", b.Version, b.SessionID, b.NetworkMode)
		}
		if progress.what != "build" || progress.total == 0 || progress.done != progress.total {
			t.Errorf("totals = %q %d/%d", progress.what, progress.done, progress.total)
		}
		if !strings.Contains(progress.String(), "] RUN --mount=type=cache") {
			t.Errorf("progress:\n%s", progress.String())
		}
	})
	t.Run("a Dockerfile that needs no BuildKit builds on the classic builder, with the limits", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		writeTree(t, ws, map[string]string{"Dockerfile": "FROM x AS base\nRUN true\nFROM x\nCOPY --from=base /a /a\n"})
		eng := buildkitEngine{newFakeEngine()}
		if _, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "Dockerfile", Workspace: ws, Root: openRoot(t, ws)}, &imageBuilds{}); err != nil {
			t.Fatal(err)
		}
		if b := eng.builds[0]; b.Version != build.BuilderV1 || b.Memory == 0 || b.SessionID != "" {
			t.Errorf("build options: version %q, memory %d, session %q", b.Version, b.Memory, b.SessionID)
		}
	})
	t.Run("a heredoc is refused before anything is built", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		writeTree(t, ws, map[string]string{"Dockerfile": "FROM x\nRUN <<EOF\ntrue\nEOF\n"})
		eng := buildkitEngine{newFakeEngine()}
		_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "Dockerfile", Workspace: ws, Root: openRoot(t, ws)}, &imageBuilds{})
		if !errors.Is(err, ErrDockerfileFeature) || len(eng.builds) != 0 {
			t.Errorf("err = %v, %d builds", err, len(eng.builds))
		}
	})
	t.Run("a secret whose variable is unset fails the build, naming it", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		writeTree(t, ws, map[string]string{"Dockerfile": "FROM x\nRUN --mount=type=secret,id=tok true\n"})
		eng := buildkitEngine{newFakeEngine()}
		req := ImageRequest{Spec: "Dockerfile", Workspace: ws, Root: openRoot(t, ws),
			Secrets: []sandbox.BuildSecret{{ID: "tok", Env: "NOPE"}}, LookupEnv: func(string) (string, bool) { return "", false }}
		_, err := resolveImage(t.Context(), eng, req, &imageBuilds{})
		if err == nil || !strings.Contains(err.Error(), "build secret tok: environment variable NOPE is not set") || len(eng.builds) != 0 {
			t.Errorf("err = %v, %d builds", err, len(eng.builds))
		}
	})
}

func TestFromImages(t *testing.T) {
	t.Parallel()
	df := "ARG BASE\nFROM registry.example.com:5000/team/dev:1 AS build\n" +
		"FROM --platform=linux/amd64 golang:1.22 AS go\n" +
		"FROM build\nFROM ${BASE}\nfrom scratch\nFROM ghcr.io/o/i@sha256:" + strings.Repeat("a", 64) + "\n" +
		"FROM registry.example.com:5000/team/other\n"
	refs := fromImages([]byte(df))
	var names []string
	for _, r := range refs {
		names = append(names, reference.FamiliarString(r))
	}
	if got := strings.Join(names, " "); got != "registry.example.com:5000/team/dev:1 golang:1.22 ghcr.io/o/i@sha256:"+strings.Repeat("a", 64)+" registry.example.com:5000/team/other" {
		t.Errorf("fromImages() = %q", got)
	}
	if got := strings.Join(registryHosts(refs), " "); got != "registry.example.com:5000 docker.io ghcr.io" {
		t.Errorf("registryHosts() = %q", got)
	}
}

func TestClassicAuthConfigs(t *testing.T) {
	t.Parallel()
	creds := func(host string) (string, string, error) {
		switch host {
		case "docker.io":
			return "bob", "pw", nil
		case "ghcr.io":
			return "<token>", "tok", nil
		case "broken.test":
			return "", "", errors.New("helper failed")
		}
		return "", "", nil
	}
	m, err := classicAuthConfigs([]string{"docker.io", "ghcr.io", "none.test"}, creds)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["https://index.docker.io/v1/"].Password != "pw" || m["ghcr.io"].IdentityToken != "tok" || m["ghcr.io"].Username != "" {
		t.Errorf("auth configs = %+v", m)
	}
	if _, err := classicAuthConfigs([]string{"broken.test"}, creds); err == nil || !strings.Contains(err.Error(), "broken.test") {
		t.Errorf("err = %v", err)
	}
	if m, _ := classicAuthConfigs([]string{"docker.io"}, nil); m != nil {
		t.Errorf("no creds func gives %+v", m)
	}
}
