package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
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
	f, err := elf.Open(path)
	if err != nil {
		return helperFile{}, fmt.Errorf("helper binary %s is not a Linux executable (build shiro for linux with CGO_ENABLED=0 and set SHIRO_HELPER): %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return helperFile{}, fmt.Errorf("helper binary %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d\x00%d", path, fi.Size(), fi.ModTime().UnixNano())))
	return helperFile{path: path, key: hex.EncodeToString(sum[:])[:12], size: fi.Size()}, nil
}

// container is the running container of one workspace.
type ctr struct {
	id   string
	name string
	spec containerSpec
	// path is the image's PATH (empty when it sets none).
	path string
}

// ensureContainer returns the running container for opts, creating or
// starting it as needed. It is safe to call again after the container was
// removed behind shiro's back.
func (e *Engine) ensureContainer(ctx context.Context, opts Options, helper helperFile) (ctr, error) {
	img, err := e.api.ImageInspect(ctx, opts.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return ctr{}, &MissingImageError{Image: opts.Image}
		}
		return ctr{}, fmt.Errorf("inspect image %s: %w", opts.Image, err)
	}
	spec := containerSpec{
		Workspace:   opts.Workspace,
		Image:       opts.Image,
		ImageID:     img.ID,
		Protected:   protectedPaths(opts.Workspace),
		Memory:      opts.Memory,
		CPUs:        opts.CPUs,
		Pids:        opts.Pids,
		Network:     opts.Network,
		IdleTimeout: opts.IdleTimeout,
		UID:         opts.UID,
		GID:         opts.GID,
	}
	c := ctr{name: spec.containerName(), spec: spec}
	if img.Config != nil {
		c.path = envValue(img.Config.Env, "PATH")
	}

	info, err := e.api.ContainerInspect(ctx, c.name, client.ContainerInspectOptions{})
	switch {
	case err == nil:
		c.id = info.Container.ID
		if err := e.ensureHelper(ctx, c.id, helper); err != nil {
			return ctr{}, err
		}
		if info.Container.State != nil && info.Container.State.Running {
			return c, nil
		}
	case cerrdefs.IsNotFound(err):
		fmt.Fprintf(opts.Progress, "creating sandbox container %s\n", c.name)
		id, err := e.createContainer(ctx, opts, spec, c.name, helper)
		if err != nil {
			return ctr{}, err
		}
		c.id = id
	default:
		return ctr{}, fmt.Errorf("inspect container %s: %w", c.name, err)
	}
	if _, err := e.api.ContainerStart(ctx, c.id, client.ContainerStartOptions{}); err != nil {
		return ctr{}, fmt.Errorf("start container %s: %w", c.name, err)
	}
	return c, nil
}

func (e *Engine) createContainer(ctx context.Context, opts Options, spec containerSpec, name string, helper helperFile) (string, error) {
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: spec.Workspace, Target: spec.Workspace},
		{Type: mount.TypeVolume, Source: homeVolume(spec.Workspace), Target: homeDir,
			VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{LabelManaged: "true", LabelWorkspace: spec.Workspace}}},
	}
	for _, p := range spec.Protected {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: p, Target: p, ReadOnly: true})
	}
	pids := spec.Pids
	idle := strconv.FormatInt(int64(spec.IdleTimeout/time.Second), 10) + "s"
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
		},
		StopSignal: "SIGTERM",
	}
	host := &container.HostConfig{
		Mounts:      mounts,
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		NetworkMode: container.NetworkMode(spec.Network),
		Tmpfs:       map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777"},
		Resources: container.Resources{
			Memory:     spec.Memory,
			MemorySwap: spec.Memory, // no swap: a hog meets the limit instead of the disk
			NanoCPUs:   int64(spec.CPUs * 1e9),
			PidsLimit:  &pids,
		},
	}
	// The container is made and prepared under a temporary name, then
	// renamed: another shiro racing to create the same container either
	// finds a ready one or none, never one half prepared.
	tmpName := name + "-new-" + randomSuffix()
	res, err := e.api.ContainerCreate(ctx, client.ContainerCreateOptions{Name: tmpName, Config: cfg, HostConfig: host})
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", name, err)
	}
	if err := e.prepareUser(ctx, res.ID, opts); err != nil {
		e.removeQuietly(ctx, res.ID)
		return "", err
	}
	if err := e.copyHelper(ctx, res.ID, helper, opts.UID, opts.GID); err != nil {
		e.removeQuietly(ctx, res.ID)
		return "", err
	}
	if _, err := e.api.ContainerRename(ctx, res.ID, client.ContainerRenameOptions{NewName: name}); err != nil {
		e.removeQuietly(ctx, res.ID)
		if isConflict(err) { // another shiro finished first: use its container
			info, ierr := e.api.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
			if ierr == nil {
				return info.Container.ID, nil
			}
		}
		return "", fmt.Errorf("name container %s: %w", name, err)
	}
	return res.ID, nil
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
	_, _ = e.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
}

// ensureHelper copies the current helper into an existing container when it
// is not there yet (shiro was upgraded since the container was made).
func (e *Engine) ensureHelper(ctx context.Context, id string, helper helperFile) error {
	_, err := e.api.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: helper.helperPath()})
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("look for the helper in %s: %w", id[:12], err)
	}
	info, err := e.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect container %s: %w", id[:12], err)
	}
	uid, gid := parseUser(info.Container.Config.User)
	return e.copyHelper(ctx, id, helper, uid, gid)
}

func parseUser(s string) (int, int) {
	u, g, _ := strings.Cut(s, ":")
	uid, _ := strconv.Atoi(u)
	gid, _ := strconv.Atoi(g)
	return uid, gid
}

// copyHelper puts the helper binary at helper.helperPath(), in a directory
// owned by the command user so the helper can keep its state there.
func (e *Engine) copyHelper(ctx context.Context, id string, helper helperFile, uid, gid int) error {
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
			tw.WriteHeader(&tar.Header{Name: ".shiro/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: uid, Gid: gid, ModTime: now}),
			tw.WriteHeader(&tar.Header{Name: ".shiro/bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now}),
			tw.WriteHeader(&tar.Header{Name: ".shiro/bin/shiro-" + helper.key, Typeflag: tar.TypeReg, Mode: 0o755, Size: helper.size, ModTime: now}),
		)
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	if _, err := e.api.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: pr}); err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("copy the helper into %s: %w", id[:12], err)
	}
	return nil
}

// prepareUser gives the command user a passwd and group entry and a HOME
// it owns. The copies are done by the engine, so the container needs no
// capability for them.
func (e *Engine) prepareUser(ctx context.Context, id string, opts Options) error {
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
	if _, err := e.api.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/etc", Content: &buf}); err != nil {
		return fmt.Errorf("write the sandbox user's passwd entry: %w", err)
	}

	// The home volume's root takes the owner of the directory copied onto it.
	buf.Reset()
	tw = tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "shiro/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: opts.UID, Gid: opts.GID, ModTime: now}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := e.api.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/home", Content: &buf}); err != nil {
		return fmt.Errorf("make the sandbox user's home: %w", err)
	}
	return nil
}

// readFile returns one regular file from a container (created or running).
func (e *Engine) readFile(ctx context.Context, id, path string) ([]byte, error) {
	res, err := e.api.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
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
