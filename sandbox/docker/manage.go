package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// ContainerInfo describes one managed container for `shiro sandbox ls`.
type ContainerInfo struct {
	Workspace string `json:"workspace"`
	Container string `json:"container"`
	ID        string `json:"id"`
	Image     string `json:"image"`
	// ImageID is the local image the container runs.
	ImageID  string    `json:"imageId,omitempty"`
	State    string    `json:"state"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"lastUsed,omitzero"`
	// Orphaned is set when the workspace directory no longer exists.
	Orphaned bool `json:"orphaned,omitempty"`
}

// List returns shiro's containers, for one workspace or (ws == "") all.
func (e *Engine) List(ctx context.Context, ws string) ([]ContainerInfo, error) {
	f := client.Filters{}.Add("label", LabelManaged+"=true")
	if ws != "" {
		f = f.Add("label", LabelWorkspace+"="+ws)
	}
	res, err := e.ctr.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list sandbox containers: %w", err)
	}
	out := make([]ContainerInfo, 0, len(res.Items))
	for _, c := range res.Items {
		if len(c.Names) == 0 || !e.ownsContainer(c.ID, c.Names[0], c.Labels) {
			continue
		}
		info := ContainerInfo{
			Workspace: c.Labels[LabelWorkspace],
			ID:        c.ID,
			Image:     c.Labels[LabelImage],
			ImageID:   c.ImageID,
			State:     string(c.State),
			Created:   time.Unix(c.Created, 0),
		}
		if len(c.Names) > 0 {
			info.Container = strings.TrimPrefix(c.Names[0], "/")
		}
		if info.Image == "" {
			info.Image = c.Image
		}
		if _, err := os.Stat(info.Workspace); errors.Is(err, os.ErrNotExist) {
			info.Orphaned = true
		}
		if st, err := e.ctr.ContainerStatPath(ctx, c.ID, client.ContainerStatPathOptions{Path: lastUsedPath}); err == nil {
			info.LastUsed = st.Stat.Mtime
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Workspace != out[j].Workspace {
			return out[i].Workspace < out[j].Workspace
		}
		return out[i].Created.After(out[j].Created)
	})
	return out, nil
}

// lastUsedPath is touched by the helper each time a session opens.
const lastUsedPath = containerStateDir + "/last-used"

// Stop stops the given containers (by id), giving each a few seconds.
func (e *Engine) Stop(ctx context.Context, ids ...string) error {
	var errs []error
	timeout := 3
	for _, id := range ids {
		if _, err := e.ctr.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("stop %s: %w", short(id), err))
		}
	}
	return errors.Join(errs...)
}

// Remove force-removes the given containers (by id) with their volumes:
// the shadow git directory, and HOME and the state volume unless another
// container of the workspace still uses them. A new container starts with
// a fresh HOME.
func (e *Engine) Remove(ctx context.Context, ids ...string) error {
	var errs []error
	for _, id := range ids {
		errs = append(errs, e.remove(ctx, id, true))
	}
	return errors.Join(errs...)
}

// remove removes one container with its volumes; without force, a running
// container stays and the error says so (cerrdefs.IsConflict).
func (e *Engine) remove(ctx context.Context, id string, force bool) error {
	var vols []string
	if info, err := e.ctr.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil {
		for _, m := range info.Container.Mounts {
			if m.Type == mount.TypeVolume && m.Name != "" {
				vols = append(vols, m.Name)
			}
		}
	}
	if _, err := e.ctr.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: force, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove %s: %w", short(id), err)
	}
	e.reg.removeContainer(id)
	return e.removeVolumes(ctx, vols...)
}

// removeVolumes removes the named volumes that are shiro's for this user
// and used by no container.
func (e *Engine) removeVolumes(ctx context.Context, names ...string) error {
	var errs []error
	for _, name := range names {
		list, err := e.ctr.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("name", name)})
		if err != nil {
			errs = append(errs, fmt.Errorf("list volumes: %w", err))
			continue
		}
		for _, v := range list.Items {
			if v.Name != name || !e.ownsVolume(v.Name, v.Labels) {
				continue
			}
			_, err := e.ctr.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
			switch {
			case err == nil, cerrdefs.IsNotFound(err):
				e.reg.removeVolume(name)
			case cerrdefs.IsConflict(err), strings.Contains(err.Error(), "in use"):
			default:
				errs = append(errs, fmt.Errorf("remove volume %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// PruneReport says what Prune removed (or would remove, on a dry run).
type PruneReport struct {
	Containers []ContainerInfo `json:"containers"`
	Volumes    []string        `json:"volumes"`
}

// Prune removes stopped managed containers, running ones whose workspace is
// gone, their volumes, and volumes no container uses whose workspace is
// gone. Only what carries this user's owner label is touched.
func (e *Engine) Prune(ctx context.Context, dryRun bool) (PruneReport, error) {
	all, err := e.List(ctx, "")
	if err != nil {
		return PruneReport{}, err
	}
	var candidates []ContainerInfo
	for _, c := range all {
		switch {
		case c.Orphaned:
			candidates = append(candidates, c)
		case c.State == string(container.StateRunning):
		case c.State == string(container.StateCreated) && time.Since(c.Created) < pruneStartGrace:
			// A session is starting it.
		default:
			candidates = append(candidates, c)
		}
	}
	var rep PruneReport
	if dryRun {
		rep.Containers = candidates
	}
	vols, err := e.ctr.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", LabelManaged+"=true").Add("dangling", "true")})
	if err != nil {
		return rep, fmt.Errorf("list sandbox volumes: %w", err)
	}
	for _, v := range vols.Items {
		ws := v.Labels[LabelWorkspace]
		if !e.ownsVolume(v.Name, v.Labels) {
			continue
		}
		if _, err := os.Stat(ws); errors.Is(err, os.ErrNotExist) {
			rep.Volumes = append(rep.Volumes, v.Name)
		}
	}
	if dryRun {
		return rep, nil
	}
	var errs []error
	for _, c := range candidates {
		// A stopped container that a session started meanwhile is in use:
		// removing it without force fails, and it stays.
		err := e.remove(ctx, c.ID, c.Orphaned)
		if cerrdefs.IsConflict(err) {
			continue
		}
		if err == nil {
			rep.Containers = append(rep.Containers, c)
		}
		errs = append(errs, err)
	}
	return rep, errors.Join(append(errs, e.removeVolumes(ctx, rep.Volumes...))...)
}

// pruneStartGrace is how long prune leaves a container that was created
// and not yet started: a session may be starting it.
const pruneStartGrace = time.Minute

// sweep is the start-up reconciliation: stopped managed containers whose
// workspace no longer exists are removed, with their volumes. Failures
// are ignored; prune reports them.
func (e *Engine) sweep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", LabelManaged+"=true").Add("status", "exited", "created", "dead")
	res, err := e.ctr.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return
	}
	for _, c := range res.Items {
		if len(c.Names) == 0 || !e.ownsContainer(c.ID, c.Names[0], c.Labels) {
			continue
		}
		if _, err := os.Stat(c.Labels[LabelWorkspace]); errors.Is(err, os.ErrNotExist) {
			_ = e.Remove(ctx, c.ID)
		}
	}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ours reports whether a container carrying LabelManaged is one shiro made
// for a workspace. The label alone is not enough: a container inherits its
// image's labels, and images built by older versions carried it.
func ours(labels map[string]string) bool {
	return labels[LabelManaged] == "true" && labels[LabelWorkspace] != "" && labels[LabelConfig] != ""
}
