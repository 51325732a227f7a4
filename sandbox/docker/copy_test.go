package docker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
)

// TestCopyModeHoldsAVolumeAtTheWorkspacesPath: in copy mode the container
// does not see the user's directory at all; a volume of its own, owned by
// the command user, stands at the same path and outlives the session.
func TestCopyModeHoldsAVolumeAtTheWorkspacesPath(t *testing.T) {
	api := testenv.RequireDocker(t)
	ws := testenv.Workspace(t, api)
	if err := os.WriteFile(filepath.Join(ws, "host.txt"), []byte("on the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copyMode := func(o *docker.Options) {
		o.WorkspaceMode = sandbox.WorkspaceCopy
		o.UID, o.GID = 1001, 1001 // a normal user, as on a laptop
	}
	sb := openSandbox(t, ws, copyMode)
	if info := sb.Info(); !info.Copy || info.Helper == "" {
		t.Errorf("Info = %+v, want a copy with its helper named", info)
	}
	var out strings.Builder
	res, err := sb.Run(t.Context(), sandbox.Command{Shell: "id -u; pwd; stat -c %u .; test -e host.txt && echo seen || echo unseen; echo made > made.txt", Stdout: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if got, want := out.String(), "1001\n"+ws+"\n1001\nunseen\n"; got != want {
		t.Errorf("in the container:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); !os.IsNotExist(err) {
		t.Errorf("the container wrote the user's directory: %v", err)
	}
	in, err := api.ContainerInspect(t.Context(), sb.ContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range in.Container.Mounts {
		if m.Type == mount.TypeBind && (m.Source == ws || strings.HasPrefix(ws, m.Source+"/")) {
			t.Errorf("the workspace is bind-mounted: %+v", m)
		}
		if m.Destination == ws && m.Type != mount.TypeVolume {
			t.Errorf("the workspace's path holds a %s, not a volume", m.Type)
		}
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	// The next session finds the copy as the last one left it.
	sb = openSandbox(t, ws, copyMode)
	out.Reset()
	if _, err := sb.Run(t.Context(), sandbox.Command{Args: []string{"cat", "made.txt"}, Stdout: &out}); err != nil || out.String() != "made\n" {
		t.Errorf("the copy did not outlive the session: %q, %v", out.String(), err)
	}
}
