package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox/helper"
)

// helperFile is a static shiro binary to copy into containers.
type helperFile struct {
	path string
	key  string // changes when the binary changes
	size int64
}

// helperPath is where the helper lives inside the container.
func (h helperFile) helperPath() string { return helperDir + "/bin/shiro-" + h.key }

// loadHelper checks the binary is a static Linux executable and keys it by
// size and modification time (cheap; hashing 20 MB on every start is not).
func loadHelper(path string) (helperFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return helperFile{}, fmt.Errorf("helper binary: %w", err)
	}
	if err := helper.CheckStatic(path); err != nil {
		return helperFile{}, err
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d\x00%d", path, fi.Size(), fi.ModTime().UnixNano())))
	return helperFile{path: path, key: hex.EncodeToString(sum[:])[:12], size: fi.Size()}, nil
}

// ctr is the running container of one workspace.
type ctr struct {
	id   string
	name string
	spec containerSpec
	// path is the image's PATH (empty when it sets none).
	path string
	// digest is the image exactly (imageDigest).
	digest string
}

// containerPlan is what shiro would create for a session: the check a
// container must pass to be reused.
type containerPlan struct {
	spec    containerSpec
	name    string
	config  *container.Config
	host    *container.HostConfig
	volumes map[string]string // named volume → what it is ("home", "state", "shadow")
	git     gitPlan
}

// plan works out the container for opts (image inspected) and git.
func (e *Engine) plan(opts Options, imageID, wsID string, git gitPlan, helper helperFile) containerPlan {
	var extra []string
	spec := containerSpec{
		Workspace:   opts.Workspace,
		WorkspaceID: wsID,
		Image:       opts.Image,
		ImageID:     imageID,
		Memory:      opts.Memory,
		CPUs:        opts.CPUs,
		Pids:        opts.Pids,
		Network:     networkMode(opts.Network),
		IdleTimeout: opts.Idle,
		UID:         opts.UID,
		GID:         opts.GID,
		Copy:        opts.copyMode(),
	}
	home, state := homeVolume(opts.Workspace, wsID), stateVolume(opts.Workspace, wsID)
	// The shadow volume is named after the container, whose name depends on
	// the mounts: name it from everything but itself.
	if git.Repo != nil {
		extra = append(extra, "repo:"+git.Repo.CommonDir+":"+git.Repo.Top)
	}
	for _, ro := range git.ReadOnly {
		extra = append(extra, "ro:"+ro)
	}
	for _, d := range git.Fixed {
		extra = append(extra, "fixed:"+d)
	}
	socks := e.socketDir(opts, wsID)
	if socks != "" {
		extra = append(extra, "sockets:"+socks)
	}
	copyVol := ""
	if opts.copyMode() {
		copyVol = copyVolume(opts.Workspace, wsID)
		extra = append(extra, "copy:"+copyVol)
	}
	spec.Mounts = extra
	name := spec.containerName()
	shadow := shadowVolume(name)
	labels := func(vol string) map[string]string {
		return map[string]string{
			LabelManaged:   "true",
			LabelWorkspace: opts.Workspace,
			LabelOwner:     ownerToken(e.ownerKey, "volume", vol, opts.Workspace, ""),
		}
	}
	mounts := git.mounts(opts.Workspace, home, state, shadow, labels)
	if copyVol != "" {
		// The copy of the workspace, where the directory itself would be.
		mounts[slices.IndexFunc(mounts, func(m mount.Mount) bool { return m.Target == opts.Workspace })] =
			mount.Mount{Type: mount.TypeVolume, Source: copyVol, Target: opts.Workspace, VolumeOptions: &mount.VolumeOptions{Labels: labels(copyVol)}}
	}
	if socks != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: socks, Target: sockMount, ReadOnly: true})
	}
	idle := strconv.FormatInt(int64(spec.IdleTimeout/time.Second), 10) + "s"
	pids := spec.Pids
	cfg := &container.Config{
		Image:      spec.Image,
		User:       fmt.Sprintf("%d:%d", spec.UID, spec.GID),
		Entrypoint: []string{helper.helperPath(), "helper", "init", "--idle", idle},
		Cmd:        []string{},
		WorkingDir: spec.Workspace,
		Env:        []string{"HOME=" + homeDir, "LANG=C.UTF-8"},
		Labels: map[string]string{
			LabelManaged:   "true",
			LabelWorkspace: spec.Workspace,
			LabelConfig:    spec.hash(),
			LabelVersion:   opts.Version,
			LabelImage:     spec.Image,
			LabelOwner:     ownerToken(e.ownerKey, "container", name, spec.Workspace, spec.hash()),
		},
		StopSignal: "SIGTERM",
	}
	host := &container.HostConfig{
		Mounts:      mounts,
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		NetworkMode: container.NetworkMode(spec.Network),
		Tmpfs:       map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", spec.tmpSize())},
		Resources: container.Resources{
			Memory:     spec.Memory,
			MemorySwap: spec.Memory, // no swap: a hog meets the limit instead of the disk
			NanoCPUs:   int64(spec.CPUs * 1e9),
			PidsLimit:  &pids,
		},
	}
	vols := map[string]string{home: "home", state: "state"}
	if git.Repo != nil {
		vols[shadow] = "shadow"
	}
	if copyVol != "" {
		vols[copyVol] = "copy"
	}
	return containerPlan{spec: spec, name: name, config: cfg, host: host, volumes: vols, git: git}
}

// ensureContainer returns the running container for the plan, creating or
// starting it as needed, and reusing an existing one only if it is exactly
// what shiro would create. It is safe to call again after the container
// was removed behind shiro's back.
func (e *Engine) ensureContainer(ctx context.Context, opts Options, helper helperFile, git gitPlan, wsID string) (ctr, error) {
	img, err := e.ctr.ImageInspect(ctx, opts.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return ctr{}, &MissingImageError{Image: opts.Image}
		}
		return ctr{}, fmt.Errorf("inspect image %s: %w", opts.Image, err)
	}
	p := e.plan(opts, img.ID, wsID, git, helper)
	c := ctr{name: p.name, spec: p.spec, digest: imageDigest(opts.Image, img.ID, img.RepoDigests)}
	if img.Config != nil {
		c.path = envValue(img.Config.Env, "PATH")
	}

	id, running, err := e.findContainer(ctx, p, opts)
	if err != nil {
		return ctr{}, err
	}
	if id != "" {
		c.id = id
		if err := e.ensureHelper(ctx, c.id, helper); err != nil {
			return ctr{}, err
		}
		if running {
			return c, nil
		}
	} else {
		fmt.Fprintf(opts.Progress, "creating sandbox container %s\n", c.name)
		name := p.name
		if taken, _ := e.exists(ctx, name); taken {
			name = p.name + "-" + randomSuffix() // the name is squatted by a container that is not ours
			p.config.Labels[LabelOwner] = ownerToken(e.ownerKey, "container", name, p.spec.Workspace, p.spec.hash())
		}
		if c.id, err = e.createContainer(ctx, opts, p, name, helper); err != nil {
			return ctr{}, err
		}
		c.name = name
	}
	// The engine makes the mounts as the container starts.
	if err := git.checkSources(opts.Workspace); err != nil {
		return ctr{}, fmt.Errorf("start container %s: %w", c.name, err)
	}
	if _, err := e.ctr.ContainerStart(ctx, c.id, client.ContainerStartOptions{}); err != nil {
		return ctr{}, fmt.Errorf("start container %s: %w", c.name, err)
	}
	return c, nil
}

// findContainer looks for a container that passes the plan's check: the
// one under the plan's name, else any of the workspace's with the plan's
// settings. A container under shiro's name that fails the check is left
// alone (it is not shiro's to remove) with a notice.
func (e *Engine) findContainer(ctx context.Context, p containerPlan, opts Options) (id string, running bool, err error) {
	info, err := e.ctr.ContainerInspect(ctx, p.name, client.ContainerInspectOptions{})
	switch {
	case err == nil:
		why := e.mismatch(info.Container, p)
		if why == "" {
			return info.Container.ID, e.runningUnpaused(ctx, info.Container), nil
		}
		opts.Notices(fmt.Sprintf("the container named %s is not one shiro would make (%s); it is left alone and another is used", p.name, why))
	case cerrdefs.IsNotFound(err):
	default:
		return "", false, fmt.Errorf("inspect container %s: %w", p.name, err)
	}
	f := client.Filters{}.Add("label", LabelWorkspace+"="+p.spec.Workspace).Add("label", LabelConfig+"="+p.spec.hash())
	list, err := e.ctr.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return "", false, fmt.Errorf("list sandbox containers: %w", err)
	}
	for _, item := range list.Items {
		if len(item.Names) == 0 || strings.TrimPrefix(item.Names[0], "/") == p.name {
			continue
		}
		info, err := e.ctr.ContainerInspect(ctx, item.ID, client.ContainerInspectOptions{})
		if err != nil {
			continue
		}
		if e.mismatch(info.Container, p) == "" {
			return info.Container.ID, e.runningUnpaused(ctx, info.Container), nil
		}
	}
	return "", false, nil
}

// runningUnpaused reports whether c runs and is not paused. A paused one
// is a last session's end that did not finish (shiro was killed while the
// container was frozen): what is in it may not have been killed, so it is
// killed now, and started again like a stopped one.
func (e *Engine) runningUnpaused(ctx context.Context, c container.InspectResponse) bool {
	if c.State == nil || !c.State.Running {
		return false
	}
	if !c.State.Paused {
		return true
	}
	if e.frz != nil {
		_ = killContainer(ctx, e.frz, c.ID)
	}
	return false
}

func (e *Engine) exists(ctx context.Context, name string) (bool, error) {
	_, err := e.ctr.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// mismatch says how a container differs from what the plan would create,
// or "" when it may be reused: who made it, who it runs as, its
// privileges, mounts, network and limits.
func (e *Engine) mismatch(c container.InspectResponse, p containerPlan) string {
	if c.Config == nil || c.HostConfig == nil {
		return "it has no configuration"
	}
	if !e.ownsContainer(c.ID, c.Name, c.Config.Labels) {
		return "it does not carry this user's shiro owner label"
	}
	cfg, want := c.Config, p.config
	hc, wantHC := c.HostConfig, p.host
	switch {
	case cfg.Labels[LabelConfig] != want.Labels[LabelConfig]:
		return "its settings differ"
	case cfg.User != want.User:
		return fmt.Sprintf("it runs as %q", cfg.User)
	case c.Image != p.spec.ImageID:
		return "it runs another image"
	case len(cfg.Entrypoint) != len(want.Entrypoint) || !strings.HasPrefix(cfg.Entrypoint[0], helperDir+"/bin/shiro-") ||
		!slices.Equal(cfg.Entrypoint[1:], want.Entrypoint[1:]):
		return "its entrypoint is not shiro's init"
	case hc.Privileged:
		return "it is privileged"
	case len(hc.CapAdd) > 0 || !slices.Equal(hc.CapDrop, wantHC.CapDrop):
		return "its capabilities differ"
	case !slices.Equal(hc.SecurityOpt, wantHC.SecurityOpt):
		return "its security options differ"
	case hc.NetworkMode != wantHC.NetworkMode:
		return fmt.Sprintf("its network is %s", hc.NetworkMode)
	// The cgroup namespace is the engine's default, which shiro does not
	// choose (without capabilities the cgroup tree is read-only either way).
	case hc.PidMode != "" || hc.UTSMode != "" || hc.UsernsMode != "" || (hc.IpcMode != "" && hc.IpcMode != "private" && hc.IpcMode != "shareable"):
		return "it shares a namespace with the host"
	case len(hc.Devices) > 0 || len(hc.DeviceRequests) > 0 || len(hc.DeviceCgroupRules) > 0:
		return "it has devices"
	case len(hc.Binds) > 0 || len(hc.VolumesFrom) > 0 || len(hc.Links) > 0 || len(hc.PortBindings) > 0 || hc.PublishAllPorts:
		return "it has extra mounts, links or ports"
	case hc.ReadonlyRootfs != wantHC.ReadonlyRootfs || hc.OomScoreAdj != wantHC.OomScoreAdj:
		return "its root filesystem or OOM settings differ"
	case hc.Memory != wantHC.Memory || hc.MemorySwap != wantHC.MemorySwap || hc.NanoCPUs != wantHC.NanoCPUs ||
		hc.PidsLimit == nil || *hc.PidsLimit != *wantHC.PidsLimit:
		return "its limits differ"
	case !maps.Equal(hc.Tmpfs, wantHC.Tmpfs):
		return "its /tmp differs"
	case !sameMounts(hc.Mounts, wantHC.Mounts):
		return "its mounts differ"
	}
	return ""
}

// sameMounts compares mount lists by type, source, target and access.
func sameMounts(a, b []mount.Mount) bool {
	key := func(ms []mount.Mount) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = fmt.Sprintf("%s|%s|%s|%t", m.Type, m.Source, m.Target, m.ReadOnly)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

func (e *Engine) createContainer(ctx context.Context, opts Options, p containerPlan, name string, helper helperFile) (string, error) {
	absent, err := e.checkVolumes(ctx, p)
	if err != nil {
		return "", err
	}
	// The volumes the engine is about to make are registered first: a
	// racing shiro of the same user that finds one made before this one
	// could register it would otherwise refuse it as planted.
	for _, name := range absent {
		e.reg.addVolume(name)
	}
	// The container is made and prepared under a temporary name, then
	// renamed: another shiro racing to create the same container either
	// finds a ready one or none, never one half prepared.
	tmpName := name + "-new-" + randomSuffix()
	res, err := e.ctr.ContainerCreate(ctx, client.ContainerCreateOptions{Name: tmpName, Config: p.config, HostConfig: p.host})
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", name, err)
	}
	// Registered before it has its name: a racing shiro that finds it
	// under that name finds it registered too.
	e.reg.addContainer(res.ID)
	if err := e.prepareUser(ctx, res.ID, opts, p); err != nil {
		e.removeQuietly(ctx, res.ID)
		return "", err
	}
	if err := e.copyHelper(ctx, res.ID, helper, p.spec.UID); err != nil {
		e.removeQuietly(ctx, res.ID)
		return "", err
	}
	if _, err := e.ctr.ContainerRename(ctx, res.ID, client.ContainerRenameOptions{NewName: name}); err != nil {
		e.removeQuietly(ctx, res.ID)
		if isConflict(err) { // another shiro finished first: use its container if it is ours
			info, ierr := e.ctr.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
			if ierr == nil && e.mismatch(info.Container, p) == "" {
				return info.Container.ID, nil
			}
		}
		return "", fmt.Errorf("name container %s: %w", name, err)
	}
	return res.ID, nil
}

// checkVolumes refuses to mount a volume under one of the plan's names
// that shiro did not make for this user (a planted HOME would run its
// ~/.profile in every command), and returns the names of those that do not
// exist yet.
func (e *Engine) checkVolumes(ctx context.Context, p containerPlan) (absent []string, err error) {
	for name := range p.volumes {
		list, err := e.ctr.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("name", name)})
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		found := false
		for _, v := range list.Items {
			if v.Name != name {
				continue
			}
			found = true
			if !e.ownsVolume(v.Name, v.Labels) {
				return nil, fmt.Errorf("the volume %s exists but shiro did not make it for you; remove it (docker volume rm %s) or look at what it holds", name, name)
			}
		}
		if !found {
			absent = append(absent, name)
		}
	}
	return absent, nil
}

// isConflict matches the engine's "name already in use" answer, which old
// engines do not always mark as a conflict.
func isConflict(err error) bool {
	return cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "already in use")
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (e *Engine) removeQuietly(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = e.ctr.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	e.reg.removeContainer(id)
}

// ensureHelper copies the current helper into an existing container when it
// is not there yet (shiro was upgraded since the container was made).
func (e *Engine) ensureHelper(ctx context.Context, id string, helper helperFile) error {
	_, err := e.ctr.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: helper.helperPath()})
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("look for the helper in %s: %w", short(id), err)
	}
	info, err := e.ctr.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect container %s: %w", short(id), err)
	}
	uid, _ := parseUser(info.Container.Config.User)
	return e.copyHelper(ctx, id, helper, uid)
}

// nobody owns the helper when commands run as root.
const nobody = 65534

func parseUser(s string) (int, int) {
	u, g, _ := strings.Cut(s, ":")
	uid, _ := strconv.Atoi(u)
	gid, _ := strconv.Atoi(g)
	return uid, gid
}

// copyHelper puts the helper binary at helper.helperPath(). It and its
// directories belong to another user than the command user (root, or
// nobody when commands run as root: without capabilities even root cannot
// write what it does not own) and are not writable by the command user,
// who can therefore neither replace it nor plant another beside it. The
// binary is executable but not readable for the command user: the kernel
// makes a process that execs a file its user cannot read not dumpable, so
// every helper process (PID 1, serve, the reapers, forward) is out of
// reach of the command user's ptrace and /proc/<pid>/fd from its first
// instruction, with no window before it could say so itself.
// helperMode is the helper binary's mode: executable by all, readable by
// its owner only (who is never the command user).
const helperMode = 0o711

func (e *Engine) copyHelper(ctx context.Context, id string, helper helperFile, cmdUID int) error {
	owner := 0
	if cmdUID == 0 {
		owner = nobody
	}
	f, err := os.Open(helper.path)
	if err != nil {
		return fmt.Errorf("open helper binary: %w", err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		now := time.Now()
		err := errors.Join(
			tw.WriteHeader(&tar.Header{Name: ".shiro/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: owner, Gid: owner, ModTime: now}),
			tw.WriteHeader(&tar.Header{Name: ".shiro/bin/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: owner, Gid: owner, ModTime: now}),
			tw.WriteHeader(&tar.Header{Name: ".shiro/bin/shiro-" + helper.key, Typeflag: tar.TypeReg, Mode: helperMode, Uid: owner, Gid: owner, Size: helper.size, ModTime: now}),
		)
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	if _, err := e.ctr.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: pr}); err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("copy the helper into %s: %w", short(id), err)
	}
	return nil
}

// prepareUser gives the command user a passwd and group entry and a HOME
// it owns. The copies are done by the engine, so the container needs no
// capability for them.
func (e *Engine) prepareUser(ctx context.Context, id string, opts Options, p containerPlan) error {
	passwd, err := e.readFile(ctx, id, "/etc/passwd")
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	group, err := e.readFile(ctx, id, "/etc/group")
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	name := opts.UserName
	if name == "" {
		name = hostUserName()
	}
	newPasswd, newGroup := addUser(passwd, group, name, opts.UID, opts.GID)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, f := range []struct {
		name string
		data []byte
	}{{"passwd", newPasswd}, {"group", newGroup}, {profilePathScript, []byte(profilePathContent)}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := e.ctr.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/etc", Content: &buf}); err != nil {
		return fmt.Errorf("write the sandbox user's passwd entry: %w", err)
	}

	// A volume's root takes the owner of the directory copied onto it.
	own := func(parent string, dirs ...string) error {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, d := range dirs {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o700, Uid: opts.UID, Gid: opts.GID, ModTime: now}); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		_, err := e.ctr.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: parent, Content: &buf})
		return err
	}
	if err := own("/home", "shiro"); err != nil {
		return fmt.Errorf("make the sandbox user's home: %w", err)
	}
	if p.spec.copyMode() {
		if err := own(filepath.Dir(opts.Workspace), filepath.Base(opts.Workspace)); err != nil {
			return fmt.Errorf("make the sandbox's copy of the workspace: %w", err)
		}
	}
	dirs := []string{"state"}
	if p.git.Repo != nil {
		dirs = append(dirs, "shadow")
	}
	if err := own(helperDir, dirs...); err != nil {
		return fmt.Errorf("make the sandbox's state directories: %w", err)
	}
	return nil
}

// readFile returns one regular file from a container (created or running).
func (e *Engine) readFile(ctx context.Context, id, path string) ([]byte, error) {
	res, err := e.ctr.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return nil, fmt.Errorf("read %s from the container: %w", path, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("read %s from the container: %w", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			return io.ReadAll(io.LimitReader(tr, 4<<20))
		}
	}
}

// addUser appends passwd and group entries for uid and gid unless present.
func addUser(passwd, group []byte, name string, uid, gid int) ([]byte, []byte) {
	hasID := func(db []byte, id int) (bool, map[string]bool) {
		names := map[string]bool{}
		found := false
		sc := bufio.NewScanner(bytes.NewReader(db))
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			if len(fields) < 3 {
				continue
			}
			names[fields[0]] = true
			if fields[2] == strconv.Itoa(id) {
				found = true
			}
		}
		return found, names
	}
	withNL := func(b []byte) []byte {
		if len(b) > 0 && b[len(b)-1] != '\n' {
			return append(b, '\n')
		}
		return b
	}
	passwd, group = withNL(bytes.Clone(passwd)), withNL(bytes.Clone(group))
	if found, names := hasID(passwd, uid); !found {
		if names[name] {
			name = "shiro"
		}
		if names[name] {
			name = fmt.Sprintf("shiro%d", uid)
		}
		passwd = fmt.Appendf(passwd, "%s:x:%d:%d:shiro sandbox user:%s:/bin/sh\n", name, uid, gid, homeDir)
	}
	if found, names := hasID(group, gid); !found {
		gname := name
		if names[gname] {
			gname = fmt.Sprintf("shiro%d", gid)
		}
		group = fmt.Appendf(group, "%s:x:%d:\n", gname, gid)
	}
	return passwd, group
}

var userNameSafe = strings.NewReplacer(":", "", "\n", "", " ", "")

func hostUserName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		if n := userNameSafe.Replace(u.Username); n != "" && len(n) <= 32 {
			return n
		}
	}
	return "shiro"
}

// MissingImageError says the sandbox image is not present and how to make it.
type MissingImageError struct{ Image string }

func (e *MissingImageError) Error() string {
	return fmt.Sprintf("the sandbox image %s is not present: build it with `shiro image build` (or `make image`), or choose another with --image", e.Image)
}
