package images

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestTag(t *testing.T) {
	t.Parallel()
	got := Tag()
	if !regexp.MustCompile(`^shiro-sandbox:[0-9a-f]{12}$`).MatchString(got) {
		t.Fatalf("Tag() = %q, want shiro-sandbox:<12 hex digits>", got)
	}
	sum := sha256.Sum256(Dockerfile())
	if want := "shiro-sandbox:" + hex.EncodeToString(sum[:])[:12]; got != want {
		t.Errorf("Tag() = %q, want %q", got, want)
	}
	if other := tagFor(append(Dockerfile(), '\n')); other == got {
		t.Errorf("a changed Dockerfile keeps the tag %q", got)
	}
}

func TestDockerfileReturnsACopy(t *testing.T) {
	t.Parallel()
	df := Dockerfile()
	df[0] ^= 0xff
	if Dockerfile()[0] == df[0] {
		t.Error("changing the returned bytes changed the embedded Dockerfile")
	}
}

func TestDefaultDockerfile(t *testing.T) {
	t.Parallel()
	want := []string{"bash", "ripgrep", "git", "ca-certificates", "procps", "coreutils",
		"findutils", "diffutils", "curl", "make", "python3"}
	if got := Packages(); !slices.Equal(got, want) {
		t.Errorf("Packages() = %q, want %q", got, want)
	}
	if got := DebianSuite(); got != "bookworm" {
		t.Errorf("DebianSuite() = %q, want bookworm", got)
	}
	df := string(Dockerfile())
	for _, want := range []string{"ENV LANG=C.UTF-8", "--no-install-recommends", "rm -rf /var/lib/apt/lists/*"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

func TestParsePackages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		df      string
		want    []string
		wantErr string
	}{
		{
			name: "one line ending the shell command with &&",
			df:   "FROM debian\nRUN apt-get update && apt-get install -y --no-install-recommends a b && rm -rf x\n",
			want: []string{"a", "b"},
		},
		{
			name: "continuation lines and comments",
			df:   "FROM debian\n# comment\nRUN apt-get update \\\n && apt-get install -y \\\n      a \\\n      b\nCMD [\"bash\"]\n",
			want: []string{"a", "b"},
		},
		{
			name: "semicolon ends the command",
			df:   "RUN apt-get install -y a b; echo done\n",
			want: []string{"a", "b"},
		},
		{
			name: "the first install line wins",
			df:   "RUN apt-get install -y a\nRUN apt-get install -y b\n",
			want: []string{"a"},
		},
		{
			name:    "no install line",
			df:      "FROM debian\nRUN apt-get update && apt-get upgrade -y\n",
			wantErr: "no RUN apt-get install line",
		},
		{
			name:    "install without packages",
			df:      "RUN apt-get install -y && true\n",
			wantErr: "names no package",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parsePackages([]byte(tt.df))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parsePackages() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("parsePackages() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseSuite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		df      string
		want    string
		wantErr bool
	}{
		{name: "slim", df: "FROM debian:bookworm-slim\n", want: "bookworm"},
		{name: "full", df: "FROM debian:trixie\n", want: "trixie"},
		{name: "platform flag and digest", df: "FROM --platform=linux/amd64 docker.io/library/debian:bookworm-slim@sha256:00\n", want: "bookworm"},
		{name: "not debian", df: "FROM alpine:3.20\n", wantErr: true},
		{name: "no tag", df: "FROM debian\n", wantErr: true},
		{name: "no FROM", df: "RUN true\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseSuite([]byte(tt.df))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseSuite() error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseSuite() = %q, want %q", got, tt.want)
			}
		})
	}
}
