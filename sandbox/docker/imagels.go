package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox"
)

// Images lists shiro's images (the built-in one, the projects' builds)
// and those its workspaces' containers run, with their digests, sizes and
// the workspaces that use them.
func (e *Engine) Images(ctx context.Context) ([]sandbox.ImageEntry, error) {
	containers, err := e.List(ctx, "")
	if err != nil {
		return nil, err
	}
	res, err := e.api.ImageList(ctx, client.ImageListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	return imageEntries(res.Items, containers), nil
}

// Images implements sandbox.ImageLister.
func (m manager) Images(ctx context.Context) ([]sandbox.ImageEntry, error) { return m.e.Images(ctx) }

var _ sandbox.ImageLister = manager{}

// imageEntries picks from the engine's images shiro's and those the
// containers run, the images shiro built first, then by name.
func imageEntries(items []image.Summary, containers []ContainerInfo) []sandbox.ImageEntry {
	users := map[string][]string{} // image id → workspaces
	refs := map[string]string{}    // image id → the reference a container runs it by
	for _, c := range containers {
		if c.ImageID == "" {
			continue
		}
		if !slices.Contains(users[c.ImageID], c.Workspace) {
			users[c.ImageID] = append(users[c.ImageID], c.Workspace)
		}
		if refs[c.ImageID] == "" {
			refs[c.ImageID] = c.Image
		}
	}
	var out []sandbox.ImageEntry
	for _, img := range items {
		built := img.Labels[LabelBuilt] == "true" || slices.Contains(img.RepoTags, images.Tag())
		ws := users[img.ID]
		if !built && len(ws) == 0 {
			continue
		}
		ref := refs[img.ID]
		if ref == "" {
			ref = firstTag(img.RepoTags)
		}
		slices.Sort(ws)
		out = append(out, sandbox.ImageEntry{
			Ref:        ref,
			Digest:     imageDigest(ref, img.ID, img.RepoDigests),
			ID:         img.ID,
			Size:       img.Size,
			Built:      built,
			Workspaces: append([]string{}, ws...),
		})
	}
	slices.SortFunc(out, func(a, b sandbox.ImageEntry) int {
		if a.Built != b.Built {
			if a.Built {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Ref, b.Ref)
	})
	return out
}

// firstTag is an image's first real tag ("<none>:<none>" is none).
func firstTag(tags []string) string {
	for _, t := range tags {
		if t != "<none>:<none>" {
			return t
		}
	}
	return ""
}
