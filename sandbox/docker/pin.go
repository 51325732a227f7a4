package docker

import (
	"strings"

	"github.com/distribution/reference"
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

// shortDigest is a digest's first twelve hex digits, as notices show it.
func shortDigest(d string) string {
	if _, hex, ok := strings.Cut(d, ":"); ok {
		d = hex
	}
	return d[:min(12, len(d))]
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
