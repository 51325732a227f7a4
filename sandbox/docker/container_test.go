package docker

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/gitshadow"
)

// fakeContainerEngine is an Engine over the in-memory fake, with a helper file and
// options for a workspace.
func fakeContainerEngine(t *testing.T) (*Engine, *fakeAPI, Options, helperFile, *[]string) {
	t.Helper()
	api := newFakeAPI()
	state := t.TempDir()
	e := &Engine{ctr: api, ownerKey: []byte("0123456789abcdef0123456789abcdef"), stateDir: state, reg: registry{dir: state}}
	bin := filepath.Join(t.TempDir(), "shiro")
	if err := os.WriteFile(bin, []byte("helper"), 0o755); err != nil {
		t.Fatal(err)
	}
	var notices []string
	opts, err := Options{Spec: sandbox.Spec{Settings: sandbox.Settings{Image: "img"}, Workspace: t.TempDir(), HelperBinary: bin, UID: 1000, GID: 1000, Notices: func(s string) { notices = append(notices, s) }}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return e, api, opts, helperFile{path: bin, key: "k1", size: 6}, &notices
}

func ensure(t *testing.T, e *Engine, opts Options, h helperFile, git gitPlan) ctr {
	t.Helper()
	c, err := e.ensureContainer(t.Context(), opts, h, git, "ws-id")
	if err != nil {
		t.Fatalf("ensureContainer: %v", err)
	}
	return c
}

func TestCreateMakesWhatTheSandboxPromises(t *testing.T) {
	t.Parallel()
	e, api, opts, h, _ := fakeContainerEngine(t)
	c := ensure(t, e, opts, h, gitPlan{})
	fc := api.find(c.id)
	if fc == nil || fc.name != c.name || !fc.running {
		t.Fatalf("container %+v not created, renamed and started", fc)
	}
	hc := fc.host
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || len(hc.CapAdd) > 0 || hc.Privileged {
		t.Errorf("capabilities: drop %v add %v privileged %v", hc.CapDrop, hc.CapAdd, hc.Privileged)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
		t.Errorf("security options %v", hc.SecurityOpt)
	}
	if fc.cfg.User != "1000:1000" {
		t.Errorf("user %q", fc.cfg.User)
	}
	if tmp := hc.Tmpfs["/tmp"]; !strings.Contains(tmp, "size=1073741824") {
		t.Errorf("/tmp %q: want a size below the 4 GiB memory limit", tmp)
	}
	// The helper and its directories belong to root, mode 0755.
	for _, hd := range fc.copied {
		if strings.HasPrefix(hd.Name, ".shiro/bin") || hd.Name == ".shiro/" {
			if hd.Uid == 1000 || hd.Gid == 1000 || hd.Mode&0o022 != 0 {
				t.Errorf("%s: owner %d:%d mode %o", hd.Name, hd.Uid, hd.Gid, hd.Mode)
			}
		}
	}
	// HOME and the state volume belong to this workspace directory.
	var vols []string
	for _, m := range hc.Mounts {
		if m.Type == mount.TypeVolume {
			vols = append(vols, m.Target+"="+m.Source)
		}
	}
	wantHome := "/home/shiro=" + homeVolume(opts.Workspace, "ws-id")
	if !slices.Contains(vols, wantHome) {
		t.Errorf("volumes %v lack %s", vols, wantHome)
	}
	if homeVolume(opts.Workspace, "ws-id") == homeVolume(opts.Workspace, "another-dir-at-that-path") {
		t.Error("a new directory at the same path shares HOME")
	}
}

func TestReuseOnlyWhatShiroMade(t *testing.T) {
	t.Parallel()
	tamper := []struct {
		name   string
		change func(fc *fakeContainer)
	}{
		{"a host mount added", func(fc *fakeContainer) {
			fc.host.Mounts = append(fc.host.Mounts, mount.Mount{Type: mount.TypeBind, Source: "/", Target: "/host"})
		}},
		{"a bind of the docker socket", func(fc *fakeContainer) { fc.host.Binds = []string{"/var/run/docker.sock:/var/run/docker.sock"} }},
		{"privileged", func(fc *fakeContainer) { fc.host.Privileged = true }},
		{"a capability", func(fc *fakeContainer) { fc.host.CapAdd = []string{"SYS_ADMIN"} }},
		{"no no-new-privileges", func(fc *fakeContainer) { fc.host.SecurityOpt = nil }},
		{"seccomp off", func(fc *fakeContainer) { fc.host.SecurityOpt = append(fc.host.SecurityOpt, "seccomp=unconfined") }},
		{"runs as root", func(fc *fakeContainer) { fc.cfg.User = "0:0" }},
		{"host pid namespace", func(fc *fakeContainer) { fc.host.PidMode = "host" }},
		{"host network", func(fc *fakeContainer) { fc.host.NetworkMode = "host" }},
		{"no memory limit", func(fc *fakeContainer) { fc.host.Memory = 0 }},
		{"no pids limit", func(fc *fakeContainer) { fc.host.PidsLimit = nil }},
		{"unlimited /tmp", func(fc *fakeContainer) { fc.host.Tmpfs = map[string]string{"/tmp": "rw"} }},
		{"a device", func(fc *fakeContainer) { fc.host.Devices = append(fc.host.Devices, devMapping()) }},
		{"another entrypoint", func(fc *fakeContainer) { fc.cfg.Entrypoint = []string{"/bin/sh", "-c", "evil"} }},
		{"a forged owner label", func(fc *fakeContainer) { fc.cfg.Labels[LabelOwner] = strings.Repeat("0", 32) }},
		{"labels copied from an image, no owner", func(fc *fakeContainer) { delete(fc.cfg.Labels, LabelOwner) }},
		{"every label and the name copied, made by someone else", nil},
	}
	for _, tc := range tamper {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, api, opts, h, notices := fakeContainerEngine(t)
			first := ensure(t, e, opts, h, gitPlan{})
			if tc.change != nil {
				tc.change(api.find(first.id))
			} else { // removed, and made again by someone else, identical
				fc := api.find(first.id)
				delete(api.containers, fc.id)
				replay := *fc
				replay.id = strings.Repeat("f", 64)
				api.containers[replay.id] = &replay
				first.id = replay.id
			}
			second := ensure(t, e, opts, h, gitPlan{})
			if second.id == first.id {
				t.Fatal("a tampered container was reused")
			}
			if second.name == first.name {
				t.Error("the new container took the squatted name")
			}
			if api.find(first.id) == nil {
				t.Error("the container that is not shiro's was removed")
			}
			if len(*notices) == 0 || !strings.Contains((*notices)[0], "not one shiro would make") {
				t.Errorf("notices %q", *notices)
			}
			// The next session finds the new one again.
			if third := ensure(t, e, opts, h, gitPlan{}); third.id != second.id {
				t.Error("the replacement was not reused")
			}
		})
	}
}

func TestReuseAndRecovery(t *testing.T) {
	t.Parallel()
	e, api, opts, h, notices := fakeContainerEngine(t)
	first := ensure(t, e, opts, h, gitPlan{})
	creates := countPrefix(api.calls, "create ")
	if again := ensure(t, e, opts, h, gitPlan{}); again.id != first.id {
		t.Error("a matching container was not reused")
	}
	if countPrefix(api.calls, "create ") != creates {
		t.Error("reuse created a container")
	}
	// Stopped (the idle timeout, `docker stop`): started again, not made anew.
	api.find(first.id).running = false
	if again := ensure(t, e, opts, h, gitPlan{}); again.id != first.id || !api.find(first.id).running {
		t.Error("a stopped container was not started again")
	}
	if countPrefix(api.calls, "create ") != creates {
		t.Error("starting a stopped container created one")
	}
	// Removed behind shiro's back: made again under the same name.
	delete(api.containers, first.id)
	back := ensure(t, e, opts, h, gitPlan{})
	if back.id == first.id || back.name != first.name {
		t.Errorf("after removal: %+v (first %+v)", back, first)
	}
	// Another setting: another container.
	opts.Memory = 1 << 30
	if other := ensure(t, e, opts, h, gitPlan{}); other.name == back.name {
		t.Error("a changed limit reused the container")
	}
	if len(*notices) != 0 {
		t.Errorf("notices %q", *notices)
	}
}

func TestRenameRaceUsesTheWinnerOnlyIfItIsShiros(t *testing.T) {
	t.Parallel()
	e, api, opts, h, _ := fakeContainerEngine(t)
	var winner string
	raced := false
	api.renameHook = func(name string) {
		if raced {
			return
		}
		raced = true
		// Another shiro finishes first, with the same plan.
		other := &Engine{ctr: api, ownerKey: e.ownerKey, stateDir: e.stateDir, reg: e.reg}
		api.renameHook = nil
		c, err := other.ensureContainer(t.Context(), opts, h, gitPlan{}, "ws-id")
		if err != nil {
			t.Error(err)
		}
		winner = c.id
		api.renameHook = func(string) {}
	}
	c := ensure(t, e, opts, h, gitPlan{})
	if c.id != winner {
		t.Errorf("the loser used %s, not the winner %s", c.id, winner)
	}
	if n := len(api.containers); n != 1 {
		t.Errorf("%d containers left, want the winner only", n)
	}
}

// Two sessions of the same user open a new workspace at once: the second
// finds the volumes the first has just made, and takes them as its own.
func TestVolumesMadeByARacingShiroAreOurs(t *testing.T) {
	t.Parallel()
	e, api, opts, h, _ := fakeContainerEngine(t)
	var other ctr
	api.createHook = func(string) {
		api.createHook = nil
		o := &Engine{ctr: api, ownerKey: e.ownerKey, stateDir: e.stateDir, reg: e.reg}
		c, err := o.ensureContainer(t.Context(), opts, h, gitPlan{}, "ws-id")
		if err != nil {
			t.Errorf("the racing shiro: %v", err)
		}
		other = c
	}
	c := ensure(t, e, opts, h, gitPlan{})
	if c.id != other.id {
		t.Errorf("the first used %s, the racing one %s", c.id, other.id)
	}
}

func TestRenameRaceLostToAContainerThatIsNotShiros(t *testing.T) {
	t.Parallel()
	e, api, opts, h, _ := fakeContainerEngine(t)
	var squatter string
	api.renameHook = func(name string) {
		api.renameHook = nil
		// Someone else takes the name while shiro prepares its container:
		// shiro's labels copied, but no owner token of this user.
		api.mu.Lock()
		defer api.mu.Unlock()
		for _, c := range api.containers {
			fake := *c
			fake.id, fake.name = strings.Repeat("e", 64), name
			fake.cfg.Labels = maps.Clone(c.cfg.Labels)
			delete(fake.cfg.Labels, LabelOwner)
			api.containers[fake.id] = &fake
			squatter = fake.id
			return
		}
	}
	_, err := e.ensureContainer(t.Context(), opts, h, gitPlan{}, "ws-id")
	if err == nil || !strings.Contains(err.Error(), "name container") {
		t.Fatalf("err = %v, want the rename's failure", err)
	}
	if api.find(squatter) == nil {
		t.Error("the squatter was removed")
	}
	if n := len(api.containers); n != 1 {
		t.Errorf("%d containers left, want the squatter only (shiro's half-made one removed)", n)
	}
	if e.reg.hasContainer(strings.Repeat("0", 63) + "1") {
		t.Error("the removed container is still registered")
	}
}

func TestSquattedVolumeIsRefused(t *testing.T) {
	t.Parallel()
	e, api, opts, h, _ := fakeContainerEngine(t)
	home := homeVolume(opts.Workspace, "ws-id")
	api.volumes[home] = map[string]string{LabelManaged: "true", LabelWorkspace: opts.Workspace} // planted, no owner token
	_, err := e.ensureContainer(t.Context(), opts, h, gitPlan{}, "ws-id")
	if err == nil || !strings.Contains(err.Error(), home) {
		t.Fatalf("err = %v, want a refusal naming %s", err, home)
	}
	if len(api.containers) != 0 {
		t.Error("a container was made on the planted volume")
	}
}

func TestSweepAndPruneTouchOnlyThisUsersContainers(t *testing.T) {
	t.Parallel()
	e, api, opts, h, _ := fakeContainerEngine(t)
	mine := ensure(t, e, opts, h, gitPlan{})
	api.find(mine.id).running = false
	// A container with shiro's labels but another user's key, and one
	// with labels inherited from an image (no owner token).
	otherState := t.TempDir()
	otherUser := &Engine{ctr: api, ownerKey: []byte("another key, another user......."), stateDir: otherState, reg: registry{dir: otherState}}
	other := opts
	other.Workspace = t.TempDir()
	theirs := ensure(t, otherUser, other, h, gitPlan{})
	api.find(theirs.id).running = false
	other.Idle = time.Minute
	inherited := ensure(t, otherUser, other, h, gitPlan{})
	delete(api.find(inherited.id).cfg.Labels, LabelOwner)
	api.find(inherited.id).running = false

	rep, err := e.Prune(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Containers) != 1 || rep.Containers[0].ID != mine.id {
		t.Errorf("pruned %+v, want only %s", rep.Containers, mine.id)
	}
	if api.find(theirs.id) == nil || api.find(inherited.id) == nil {
		t.Error("prune removed a container that is not this user's")
	}
	list, _ := e.List(t.Context(), "")
	for _, c := range list {
		if c.ID == theirs.id || c.ID == inherited.id {
			t.Errorf("List shows %s", c.ID)
		}
	}
	// The removed container's volumes went with it.
	for name := range api.volumes {
		if strings.Contains(name, workspaceVolumeKey(opts.Workspace, "ws-id")) && e.ownsVolume(name, api.volumes[name]) {
			t.Errorf("volume %s survived prune", name)
		}
	}
}

func TestGitPlanMountsTheShadowOverTheGitDirectory(t *testing.T) {
	t.Parallel()
	e, api, opts, h, _ := fakeContainerEngine(t)
	ws := opts.Workspace
	repo := &gitshadow.Repo{Top: ws, DotGit: ws + "/.git", CommonDir: ws + "/.git"}
	if err := os.MkdirAll(ws+"/vendor/x/.git", 0o755); err != nil {
		t.Fatal(err)
	}
	c := ensure(t, e, opts, h, gitPlan{Repo: repo, ReadOnly: []string{ws + "/vendor/x/.git"}, Fixed: []string{ws + "/vendor", ws + "/vendor/x"}})
	got := map[string]mount.Mount{}
	for _, m := range api.find(c.id).host.Mounts {
		got[m.Target] = m
	}
	if m := got[ws+"/.git"]; m.Type != mount.TypeVolume || m.Source != shadowVolume(c.name) {
		t.Errorf(".git is mounted as %+v, want the shadow volume", m)
	}
	if m := got[hostGitMount]; m.Source != ws+"/.git" || !m.ReadOnly {
		t.Errorf("the host's git directory is mounted as %+v, want read-only", m)
	}
	if m := got[ws+"/vendor/x/.git"]; !m.ReadOnly || m.Type != mount.TypeBind {
		t.Errorf("the user's nested repository is mounted as %+v", m)
	}
	for _, d := range []string{ws + "/vendor", ws + "/vendor/x"} {
		if m := got[d]; m.ReadOnly || m.Type != mount.TypeBind || m.Source != d {
			t.Errorf("the way to the nested repository, %s, is mounted as %+v, want read-write over itself", d, m)
		}
	}
	// A symlink put on the way since the plan: the container does not start.
	os.Rename(ws+"/vendor", ws+"/vendor.real")
	os.Symlink("vendor.real", ws+"/vendor")
	api.find(c.id).running = false
	if _, err := e.ensureContainer(t.Context(), opts, h, gitPlan{Repo: repo, ReadOnly: []string{ws + "/vendor/x/.git"}, Fixed: []string{ws + "/vendor", ws + "/vendor/x"}}, "ws-id"); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a container whose mounts go through a symlink was started: %v", err)
	}
}

func devMapping() container.DeviceMapping {
	return container.DeviceMapping{PathOnHost: "/dev/sda", PathInContainer: "/dev/sda", CgroupPermissions: "rwm"}
}

func countPrefix(list []string, p string) int {
	n := 0
	for _, s := range list {
		if strings.HasPrefix(s, p) {
			n++
		}
	}
	return n
}

// A session may be starting a container while prune runs: one created a
// moment ago and not yet started stays, and so does a stopped one that was
// started between prune's listing and its removal.
func TestPruneLeavesWhatASessionIsStarting(t *testing.T) {
	t.Parallel()
	e, api, opts, h, _ := fakeContainerEngine(t)
	starting := ensure(t, e, opts, h, gitPlan{})
	c := api.find(starting.id)
	c.running, c.state, c.created = false, "created", time.Now()

	other := opts
	other.Workspace = t.TempDir()
	restarted := ensure(t, e, other, h, gitPlan{})
	r := api.find(restarted.id)
	r.running, r.state = true, "exited" // listed as exited, running by the time it is removed

	rep, err := e.Prune(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Containers) != 0 {
		t.Errorf("prune reports %+v removed, want none", rep.Containers)
	}
	if api.find(starting.id) == nil {
		t.Error("prune removed a container created a moment ago")
	}
	if api.find(restarted.id) == nil {
		t.Error("prune removed a container that a session had started")
	}

	c.created = time.Now().Add(-2 * pruneStartGrace)
	if rep, err = e.Prune(t.Context(), false); err != nil || len(rep.Containers) != 1 || rep.Containers[0].ID != starting.id {
		t.Errorf("prune of a container created long ago and never started: %+v, %v", rep.Containers, err)
	}
}
