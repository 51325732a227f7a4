package docker

import (
	"slices"
	"testing"

	"github.com/moby/moby/api/types/image"

	"github.com/shiroagent/shiro/images"
)

func TestImageEntries(t *testing.T) {
	t.Parallel()
	items := []image.Summary{
		{ID: "sha256:team", RepoTags: []string{"registry.test/team/dev:1"}, RepoDigests: []string{"registry.test/team/dev@" + digestA}, Size: 300},
		{ID: "sha256:builtin", RepoTags: []string{images.Tag()}, Size: 100, Labels: map[string]string{LabelBuilt: "true"}},
		{ID: "sha256:project", RepoTags: []string{ProjectImageRepo + ":0123"}, Size: 200, Labels: map[string]string{LabelBuilt: "true"}},
		{ID: "sha256:other", RepoTags: []string{"postgres:16"}, Size: 400},
	}
	containers := []ContainerInfo{
		{Workspace: "/src/b", Image: "registry.test/team/dev:1", ImageID: "sha256:team"},
		{Workspace: "/src/a", Image: "registry.test/team/dev:1", ImageID: "sha256:team"},
		{Workspace: "/src/a", Image: "registry.test/team/dev:1", ImageID: "sha256:team"},
		{Workspace: "/src/c", Image: ProjectImageRepo + ":0123", ImageID: "sha256:project"},
	}
	got := imageEntries(items, containers)
	var refs []string
	for _, e := range got {
		refs = append(refs, e.Ref)
	}
	if want := []string{ProjectImageRepo + ":0123", images.Tag(), "registry.test/team/dev:1"}; !slices.Equal(refs, want) {
		t.Fatalf("images %q, want %q (shiro's first, another image no sandbox runs left out)", refs, want)
	}
	team := got[2]
	if team.Digest != digestA || team.Size != 300 || !slices.Equal(team.Workspaces, []string{"/src/a", "/src/b"}) || team.Built {
		t.Errorf("the team image: %+v", team)
	}
	if p := got[0]; p.Digest != "sha256:project" || !slices.Equal(p.Workspaces, []string{"/src/c"}) || !p.Built {
		t.Errorf("the project build: %+v", p)
	}
	if b := got[1]; len(b.Workspaces) != 0 || b.Workspaces == nil {
		t.Errorf("the built-in image unused: %+v (an empty list, not null, in JSON)", b)
	}
}
