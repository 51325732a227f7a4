package docker

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/moby/buildkit/session/auth"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/regauth"
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
	p := authProvider{lookup: func(_ context.Context, host string) (regauth.Credential, regauth.Source, error) {
		asked = append(asked, host)
		switch host {
		case "registry.test":
			return regauth.Credential{Username: "alice", Password: "s3cret"}, regauth.Source{}, nil
		case "token.test":
			return regauth.Credential{IdentityToken: "idtok"}, regauth.Source{}, nil
		case "broken.test":
			return regauth.Credential{}, regauth.Source{}, errors.New("docker-credential-gone: not found")
		}
		return regauth.Credential{}, regauth.Source{}, nil
	}}
	for _, tt := range []struct{ host, user, secret string }{
		{"registry.test", "alice", "s3cret"},
		{"other.test", "", ""},
		// BuildKit takes an identity token as a secret without a user.
		{"token.test", "", "idtok"},
		// A helper that fails gives none: the refusal names the registry.
		{"broken.test", "", ""},
	} {
		res, err := p.Credentials(t.Context(), &auth.CredentialsRequest{Host: tt.host})
		if err != nil || res.Username != tt.user || res.Secret != tt.secret {
			t.Errorf("Credentials(%s) = %v, %v; want %q, %q", tt.host, res, err, tt.user, tt.secret)
		}
	}
	if _, err := p.Credentials(t.Context(), &auth.CredentialsRequest{Host: "registry-1.docker.io"}); err != nil || asked[len(asked)-1] != "docker.io" {
		t.Errorf("Docker Hub asked as %v: %v", asked, err)
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
		if !progress.last.Build || progress.last.Of == 0 || progress.last.Done != progress.last.Of {
			t.Errorf("totals = %+v", progress.last)
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
