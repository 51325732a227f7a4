package docker

import (
	"context"
	"fmt"
	"io"

	"github.com/distribution/reference"

	"github.com/shiroagent/shiro/sandbox"
)

var _ sandbox.ImagePuller = backend{}

// PullImage pulls p.Ref on the default engine, with its registry's
// credentials, present or not (a tag may have moved).
func (backend) PullImage(ctx context.Context, p sandbox.ImagePull) (string, error) {
	if _, err := reference.ParseNormalizedNamed(p.Ref); err != nil {
		return "", fmt.Errorf("image %q: %w", p.Ref, err)
	}
	eng, err := Connect(ctx)
	if err != nil {
		return "", err
	}
	defer eng.Close()
	return eng.PullImage(ctx, p.Ref, p.Progress, nil)
}

// PullImage pulls ref with its registry's credentials (lookup; nil looks
// in the docker config file) and returns the image's id.
func (e *Engine) PullImage(ctx context.Context, ref string, progress io.Writer, lookup CredentialLookup) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "pulling %s\n", ref)
	if err := pullImage(ctx, e.api, ref, progress, lookup); err != nil {
		return "", fmt.Errorf("pull %s: %w", ref, err)
	}
	img, err := e.api.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return img.ID, nil
}
