package docker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox"
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

// fakeDistribution is the engine's image and distribution inspects.
type fakeDistribution struct {
	inspect func(ref string) (client.ImageInspectResult, error)
	dist    func(ctx context.Context, ref string) (client.DistributionInspectResult, error)
}

func (f fakeDistribution) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	return f.inspect(ref)
}

func (f fakeDistribution) DistributionInspect(ctx context.Context, ref string, _ client.DistributionInspectOptions) (client.DistributionInspectResult, error) {
	return f.dist(ctx, ref)
}

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	localID = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
)

func localImage(repoDigests ...string) func(string) (client.ImageInspectResult, error) {
	return func(string) (client.ImageInspectResult, error) {
		var r client.ImageInspectResult
		r.ID, r.RepoDigests = localID, repoDigests
		return r, nil
	}
}

func registryNames(d string) func(context.Context, string) (client.DistributionInspectResult, error) {
	return func(context.Context, string) (client.DistributionInspectResult, error) {
		var r client.DistributionInspectResult
		setString(&r.Descriptor.Digest, d)
		return r, nil
	}
}

// setString sets a string-typed field (a digest) without naming its type.
func setString[T ~string](p *T, s string) { *p = T(s) }

func TestCheckTag(t *testing.T) {
	t.Parallel()
	const ref = "registry.test:5000/team/dev:t"
	offline := func(context.Context, string) (client.DistributionInspectResult, error) {
		return client.DistributionInspectResult{}, errors.New("dial tcp: connection refused")
	}
	cases := []struct {
		name string
		api  fakeDistribution
		want string // in the notice; empty: no notice
	}{
		{"a moved tag is reported with both digests short and the way to take it",
			fakeDistribution{localImage("registry.test:5000/team/dev@" + digestA), registryNames(digestB)},
			"the tag " + ref + " moved on its registry: the sandbox runs aaaaaaaaaaaa, the tag now names bbbbbbbbbbbb; start with --pull"},
		{"a tag that did not move says nothing", fakeDistribution{localImage("registry.test:5000/team/dev@" + digestA), registryNames(digestA)}, ""},
		{"offline says nothing", fakeDistribution{localImage("registry.test:5000/team/dev@" + digestA), offline}, ""},
		{"an image no registry gave cannot be compared", fakeDistribution{localImage(), registryNames(digestB)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got string
			if m, ok := checkTag(t.Context(), c.api, ref, nil); ok {
				got = m.Notice()
			}
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("notice %q, want %q", got, c.want)
			}
		})
	}
}

func TestTagChecked(t *testing.T) {
	t.Parallel()
	cases := []struct {
		img  ResolvedImage
		want bool
	}{
		{ResolvedImage{Ref: "registry.test/team/dev:t"}, true},
		{ResolvedImage{Ref: "registry.test/team/dev@" + digestA}, false},
		{ResolvedImage{Ref: "registry.test/team/dev:t", Pulled: true}, false},
		{ResolvedImage{Ref: ProjectImageRepo + ":0123", Built: true}, false},
		{Reference(images.Tag()), false},
	}
	for _, c := range cases {
		if got := tagChecked(c.img); got != c.want {
			t.Errorf("tagChecked(%+v) = %v, want %v", c.img, got, c.want)
		}
	}
}

// The check is off the start's path: watchTag returns while the registry
// has not answered, and stop ends the question.
func TestWatchTagDoesNotWaitForTheRegistry(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	asked := make(chan struct{})
	api := fakeDistribution{localImage("registry.test/team/dev@" + digestA), func(ctx context.Context, _ string) (client.DistributionInspectResult, error) {
		close(asked)
		<-ctx.Done() // a registry that accepts and never answers
		return client.DistributionInspectResult{}, ctx.Err()
	}}
	var notices []sandbox.TagMove
	stop := watchTag(t.Context(), api, "registry.test/team/dev:t", nil, func(m sandbox.TagMove) { notices = append(notices, m) })
	<-asked // the question is pending, and the start has its answer already
	stop()
	if len(notices) != 0 {
		t.Errorf("a check without an answer gave notices %q", notices)
	}
}
