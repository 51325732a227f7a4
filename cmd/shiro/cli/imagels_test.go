package cli

import (
	"bytes"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
)

func TestWriteImageList(t *testing.T) {
	t.Parallel()
	list := []sandbox.ImageEntry{
		{Ref: "shiro-sandbox:abc", Digest: "sha256:1111111111111111111111111111111111111111111111111111111111111111", Size: 312_400_000, Built: true, Workspaces: []string{}},
		{Ref: "registry.test/team/dev:1", Digest: "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Size: 1_250_000_000, Workspaces: []string{"/src/a", "/src/b"}},
	}
	var buf bytes.Buffer
	if err := writeImageList(&buf, list); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"IMAGE                               DIGEST               SIZE     WORKSPACES\n" +
		"shiro-sandbox:abc (built by shiro)  sha256:111111111111  312.4MB  -\n" +
		"registry.test/team/dev:1            sha256:aaaaaaaaaaaa  1.2GB    /src/a, /src/b\n"
	if got := buf.String(); got != want {
		t.Errorf("image ls:\n%s\nwant:\n%s", got, want)
	}
	buf.Reset()
	if err := writeImageList(&buf, nil); err != nil || buf.String() != "No images.\n" {
		t.Errorf("an empty list: %q %v", buf.String(), err)
	}
}
