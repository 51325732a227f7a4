package docker

import (
	"errors"
	"strings"
	"testing"

	"github.com/moby/buildkit/session/auth"
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
