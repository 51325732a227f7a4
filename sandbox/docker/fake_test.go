package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/volume"
	"github.com/moby/moby/client"
)

// fakeAPI is an in-memory engine for the container code's unit tests: it
// keeps containers (config, host config, name, state) and volumes, and
// records the calls and what was copied into each container.
type fakeAPI struct {
	mu         sync.Mutex
	imageID    string
	containers map[string]*fakeContainer // by id
	volumes    map[string]map[string]string
	calls      []string
	seq        int
	// renameHook, when set, runs before a rename (to play a racing shiro).
	renameHook func(name string)
	// createHook, when set, runs after a container (and its volumes) was
	// made.
	createHook func(name string)
}

type fakeContainer struct {
	id, name string
	cfg      container.Config
	host     container.HostConfig
	running  bool
	state    string       // what the list says when set, else running or exited
	created  time.Time    // zero: long ago
	copied   []tar.Header // every entry copied in
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{imageID: "sha256:img", containers: map[string]*fakeContainer{}, volumes: map[string]map[string]string{}}
}

func (f *fakeAPI) call(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeAPI) find(idOrName string) *fakeContainer {
	if c, ok := f.containers[idOrName]; ok {
		return c
	}
	for _, c := range f.containers {
		if c.name == idOrName {
			return c
		}
	}
	return nil
}

func (f *fakeAPI) ContainerInspect(_ context.Context, id string, _ client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(id)
	if c == nil {
		return client.ContainerInspectResult{}, notFoundErr("container " + id)
	}
	cfg, host := c.cfg, c.host
	var mounts []container.MountPoint
	for _, m := range host.Mounts {
		mounts = append(mounts, container.MountPoint{Type: m.Type, Name: volName(m), Source: m.Source, Destination: m.Target, RW: !m.ReadOnly})
	}
	return client.ContainerInspectResult{Container: container.InspectResponse{
		ID: c.id, Name: "/" + c.name, Image: f.imageID, Config: &cfg, HostConfig: &host,
		State: &container.State{Running: c.running}, Mounts: mounts,
	}}, nil
}

func notFoundErr(what string) error { return fmt.Errorf("%s: %w", what, cerrdefs.ErrNotFound) }

func volName(m mount.Mount) string {
	if m.Type == mount.TypeVolume {
		return m.Source
	}
	return ""
}

func (f *fakeAPI) ContainerCreate(ctx context.Context, opts client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	res, err := f.create(opts)
	if err == nil && f.createHook != nil {
		f.createHook(opts.Name)
	}
	return res, err
}

func (f *fakeAPI) create(opts client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.find(opts.Name) != nil {
		return client.ContainerCreateResult{}, fmt.Errorf("name in use: %w", cerrdefs.ErrConflict)
	}
	f.seq++
	id := fmt.Sprintf("%064d", f.seq)
	c := &fakeContainer{id: id, name: opts.Name, cfg: *opts.Config, host: *opts.HostConfig}
	for _, m := range opts.HostConfig.Mounts {
		if m.Type == "volume" {
			if _, ok := f.volumes[m.Source]; !ok {
				labels := map[string]string{}
				if m.VolumeOptions != nil {
					labels = m.VolumeOptions.Labels
				}
				f.volumes[m.Source] = labels
			}
		}
	}
	f.containers[id] = c
	f.call("create %s", opts.Name)
	return client.ContainerCreateResult{ID: id}, nil
}

func (f *fakeAPI) ContainerStart(_ context.Context, id string, _ client.ContainerStartOptions) (client.ContainerStartResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(id)
	if c == nil {
		return client.ContainerStartResult{}, notFoundErr(id)
	}
	c.running = true
	f.call("start %s", c.name)
	return client.ContainerStartResult{}, nil
}

func (f *fakeAPI) ContainerRename(_ context.Context, id string, opts client.ContainerRenameOptions) (client.ContainerRenameResult, error) {
	if f.renameHook != nil {
		f.renameHook(opts.NewName)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if other := f.find(opts.NewName); other != nil {
		return client.ContainerRenameResult{}, fmt.Errorf("name already in use: %w", cerrdefs.ErrConflict)
	}
	c := f.find(id)
	if c == nil {
		return client.ContainerRenameResult{}, notFoundErr(id)
	}
	c.name = opts.NewName
	f.call("rename %s", opts.NewName)
	return client.ContainerRenameResult{}, nil
}

func (f *fakeAPI) ContainerRemove(_ context.Context, id string, opts client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(id)
	if c == nil {
		return client.ContainerRemoveResult{}, notFoundErr(id)
	}
	if c.running && !opts.Force {
		return client.ContainerRemoveResult{}, fmt.Errorf("container %s is running: %w", c.name, cerrdefs.ErrConflict)
	}
	delete(f.containers, c.id)
	f.call("remove %s", c.name)
	return client.ContainerRemoveResult{}, nil
}

func (f *fakeAPI) ContainerStop(context.Context, string, client.ContainerStopOptions) (client.ContainerStopResult, error) {
	return client.ContainerStopResult{}, nil
}

func (f *fakeAPI) ContainerRestart(context.Context, string, client.ContainerRestartOptions) (client.ContainerRestartResult, error) {
	return client.ContainerRestartResult{}, nil
}

func (f *fakeAPI) ContainerList(_ context.Context, opts client.ContainerListOptions) (client.ContainerListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out client.ContainerListResult
	for _, c := range f.containers {
		ok := true
		for want := range opts.Filters["label"] {
			k, v, _ := strings.Cut(want, "=")
			if c.cfg.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			state := c.state
			if state == "" {
				state = string(container.StateExited)
				if c.running {
					state = string(container.StateRunning)
				}
			}
			out.Items = append(out.Items, container.Summary{ID: c.id, Names: []string{"/" + c.name}, Labels: c.cfg.Labels, State: container.ContainerState(state), Created: c.created.Unix()})
		}
	}
	return out, nil
}

func (f *fakeAPI) ContainerStatPath(_ context.Context, id string, opts client.ContainerStatPathOptions) (client.ContainerStatPathResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(id)
	if c != nil {
		for _, h := range c.copied {
			if "/"+strings.TrimSuffix(h.Name, "/") == opts.Path {
				return client.ContainerStatPathResult{}, nil
			}
		}
	}
	return client.ContainerStatPathResult{}, notFoundErr(opts.Path)
}

func (f *fakeAPI) CopyToContainer(_ context.Context, id string, opts client.CopyToContainerOptions) (client.CopyToContainerResult, error) {
	tr := tar.NewReader(opts.Content)
	var hs []tar.Header
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return client.CopyToContainerResult{}, err
		}
		_, _ = io.Copy(io.Discard, tr)
		h.Name = strings.TrimPrefix(strings.TrimSuffix(opts.DestinationPath, "/")+"/"+h.Name, "/")
		hs = append(hs, *h)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(id)
	if c == nil {
		return client.CopyToContainerResult{}, notFoundErr(id)
	}
	c.copied = append(c.copied, hs...)
	return client.CopyToContainerResult{}, nil
}

func (f *fakeAPI) CopyFromContainer(_ context.Context, _ string, opts client.CopyFromContainerOptions) (client.CopyFromContainerResult, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := "root:x:0:0:root:/root:/bin/sh\n"
	_ = tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(opts.SourcePath, "/"), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))})
	_, _ = tw.Write([]byte(data))
	_ = tw.Close()
	return client.CopyFromContainerResult{Content: io.NopCloser(&buf)}, nil
}

func (f *fakeAPI) ExecCreate(context.Context, string, client.ExecCreateOptions) (client.ExecCreateResult, error) {
	return client.ExecCreateResult{}, fmt.Errorf("exec: not in the fake")
}

func (f *fakeAPI) ExecAttach(context.Context, string, client.ExecAttachOptions) (client.ExecAttachResult, error) {
	return client.ExecAttachResult{}, fmt.Errorf("exec: not in the fake")
}

func (f *fakeAPI) ExecInspect(context.Context, string, client.ExecInspectOptions) (client.ExecInspectResult, error) {
	return client.ExecInspectResult{}, fmt.Errorf("exec: not in the fake")
}

func (f *fakeAPI) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	return client.ImageInspectResult{InspectResponse: image.InspectResponse{ID: f.imageID}}, nil
}

func (f *fakeAPI) VolumeList(_ context.Context, opts client.VolumeListOptions) (client.VolumeListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out client.VolumeListResult
	for name, labels := range f.volumes {
		if names := opts.Filters["name"]; len(names) > 0 && !names[name] {
			continue
		}
		out.Items = append(out.Items, volume.Volume{Name: name, Labels: labels})
	}
	return out, nil
}

func (f *fakeAPI) VolumeRemove(_ context.Context, name string, _ client.VolumeRemoveOptions) (client.VolumeRemoveResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.volumes, name)
	f.call("volume rm %s", name)
	return client.VolumeRemoveResult{}, nil
}
