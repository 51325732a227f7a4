package docker

import (
	"strings"
	"testing"
)

func TestImageDigest(t *testing.T) {
	t.Parallel()
	const (
		id   = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		dA   = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		dB   = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
		repo = "registry.test:5000/team/dev"
	)
	cases := []struct {
		name, ref   string
		repoDigests []string
		want        string
	}{
		{"a pulled tag is its repository's digest", repo + ":1", []string{"other/x@" + dB, repo + "@" + dA}, dA},
		{"a short name matches its normalised digest", "golang:1.22", []string{"golang@" + dA}, dA},
		{"a pinned reference is its own digest", repo + "@" + dB, []string{repo + "@" + dA}, dB},
		{"a build has no repo digest: its id", "shiro-project:0123", nil, id},
		{"another repository's digest is not this one's", repo + ":1", []string{"other/x@" + dB}, id},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := imageDigest(c.ref, id, c.repoDigests); got != c.want {
				t.Errorf("imageDigest(%q) = %q, want %q", c.ref, got, c.want)
			}
		})
	}
}

func TestImageDescriptionShowsTheDigest(t *testing.T) {
	t.Parallel()
	const digest = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	d := ImageDescription{Ref: "registry.test/team/dev:1", ID: "sha256:1234567890abcdef", Digest: digest}
	if got := d.String(); !strings.Contains(got, "digest "+digest) || !strings.Contains(got, "(1234567890ab)") {
		t.Errorf("doctor's image line %q does not name the digest %s", got, digest)
	}
	// A build's digest is its id, already shown.
	b := ImageDescription{Ref: "shiro-project:0123", ID: "sha256:1234567890abcdef", Digest: "sha256:1234567890abcdef", Source: "/w/Dockerfile"}
	if got := b.String(); strings.Contains(got, "digest") {
		t.Errorf("a build's line %q repeats its id as a digest", got)
	}
}
