package docker

import (
	"context"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/regauth"
)

// imageDigest says exactly which image ref is: the digest a reference
// pins (name@sha256:…), else the registry's digest of ref's repository
// among the image's repo digests (a pulled image), else the local image
// id (a build, an import, an image loaded from a file).
func imageDigest(ref, id string, repoDigests []string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return id
	}
	if c, ok := named.(reference.Canonical); ok {
		return c.Digest().String()
	}
	for _, rd := range repoDigests {
		d, err := reference.ParseNormalizedNamed(rd)
		if err != nil {
			continue
		}
		if c, ok := d.(reference.Canonical); ok && d.Name() == named.Name() {
			return c.Digest().String()
		}
	}
	return id
}

// pinned reports whether ref names its image by digest (name@sha256:…):
// it is exact, and no registry is asked what it is now.
func pinned(ref string) bool {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return false
	}
	_, ok := named.(reference.Canonical)
	return ok
}

// distributionAPI is the part of the client the tag check calls: what the
// engine has, and what the registry says a tag is now.
type distributionAPI interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	DistributionInspect(ctx context.Context, ref string, opts client.DistributionInspectOptions) (client.DistributionInspectResult, error)
}

var _ distributionAPI = (*client.Client)(nil)

// tagCheckTimeout bounds the question to the registry: a check that has
// no answer by then says nothing.
const tagCheckTimeout = 3 * time.Second

// tagChecked reports whether a sandbox on img asks the registry whether
// its tag moved: a registry reference by tag that this start did not
// just pull; never the built-in image, a build or a digest.
func tagChecked(img ResolvedImage) bool {
	return img.Ref != "" && !img.Built && !img.Pulled && img.Ref != images.Tag() &&
		!strings.HasPrefix(img.Ref, ProjectImageRepo+":") && !pinned(img.Ref)
}

// checkTag asks the registry, through the engine, which image ref's tag
// names now, and reports whether it is another than the one the engine
// has under it (the one the workspace's container runs). Offline, no
// access, no registry digest to compare: no move, no error.
func checkTag(ctx context.Context, api distributionAPI, ref string, auth func(context.Context, string) string) (sandbox.TagMove, bool) {
	ctx, cancel := context.WithTimeout(ctx, tagCheckTimeout)
	defer cancel()
	img, err := api.ImageInspect(ctx, ref)
	if err != nil {
		return sandbox.TagMove{}, false
	}
	old := imageDigest(ref, img.ID, img.RepoDigests)
	if old == img.ID {
		return sandbox.TagMove{}, false // never pulled from or pushed to a registry: nothing to compare
	}
	opts := client.DistributionInspectOptions{}
	if auth != nil {
		opts.EncodedRegistryAuth = auth(ctx, ref)
	}
	res, err := api.DistributionInspect(ctx, ref, opts)
	if err != nil {
		return sandbox.TagMove{}, false
	}
	now := res.Descriptor.Digest.String()
	if now == "" || now == old {
		return sandbox.TagMove{}, false
	}
	return sandbox.TagMove{Ref: ref, Old: old, New: now}, true
}

// watchTag runs checkTag in the background, off the start's path, and
// hands a move to moved. stop cancels the check and waits for it.
func watchTag(ctx context.Context, api distributionAPI, ref string, auth func(context.Context, string) string, moved func(sandbox.TagMove)) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if m, ok := checkTag(ctx, api, ref, auth); ok && ctx.Err() == nil {
			moved(m)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// tagAuth is the engine's registry-auth header for ref's registry, from
// the user's docker credentials (EncodeRegistryAuth); empty when there
// are none or they cannot be looked up (the check then asks without).
func tagAuth(ctx context.Context, ref string) string {
	host, err := RegistryHost(ref)
	if err != nil {
		return ""
	}
	cred, _, err := regauth.Lookup(ctx, host)
	if err != nil {
		return ""
	}
	return EncodeRegistryAuth(host, cred)
}
