package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/checks"
)

// Backend is the Docker engine as a sandbox backend: a container per
// workspace on the engine DOCKER_HOST (or the current Docker context)
// names.
func Backend() sandbox.Backend { return backend{} }

type backend struct{}

func (backend) Name() string { return sandbox.BackendDocker }

// DefaultWorkspaceMode mounts the workspace on an engine of this machine
// and copies it to any other.
func (backend) DefaultWorkspaceMode(sandbox.Settings) string {
	if DefaultIsLocal() {
		return sandbox.WorkspaceMount
	}
	return sandbox.WorkspaceCopy
}

// Open connects to the engine, gets the image ready (the built-in one is
// built the first time, offline when no registry answers; a project's is
// pulled or built) and opens the workspace's container session. Closing
// the sandbox closes the connection.
func (backend) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	// A bad --env entry fails before anything is built or started; the
	// engine reads the host's values once, when it opens the sandbox.
	if err := spec.CheckEnv(); err != nil {
		return nil, err
	}
	w, done, err := openedWorkspace(spec)
	if err != nil {
		return nil, err
	}
	spec.Opened = w
	eng, err := Connect(ctx)
	if err != nil {
		done()
		return nil, err
	}
	img, err := eng.resolveSpecImage(ctx, spec, false)
	if err == nil {
		// Whether the tag moved is asked beside the start, never before it.
		stop := func() {}
		if tagChecked(img) {
			stop = watchTag(ctx, eng.api, img.Ref, tagAuth, tagMovedFunc(spec))
		}
		var sb *Sandbox
		if sb, err = eng.Open(ctx, img, Options{Spec: spec}); err == nil {
			return &ownedEngine{Sandbox: sb, eng: eng, done: done, stopCheck: stop}, nil
		}
		stop()
	}
	eng.Close()
	done()
	return nil, err
}

// tagMovedFunc is where spec hears of a moved tag: TagMoved, else a
// notice (Notices, else Progress).
func tagMovedFunc(spec sandbox.Spec) func(sandbox.TagMove) {
	switch {
	case spec.TagMoved != nil:
		return spec.TagMoved
	case spec.Notices != nil:
		return func(m sandbox.TagMove) { spec.Notices(m.Notice()) }
	}
	progress := cmp.Or[io.Writer](spec.Progress, io.Discard)
	return func(m sandbox.TagMove) { fmt.Fprintf(progress, "[notice] %s\n", m.Notice()) }
}

// openedWorkspace is spec's workspace, open: spec.Opened, or Workspace
// opened now when the spec has none. done closes what it opened, nothing
// else.
func openedWorkspace(spec sandbox.Spec) (w *workspace.Workspace, done func(), err error) {
	if spec.Opened != nil {
		return spec.Opened, func() {}, nil
	}
	if w, err = workspace.Open(spec.Workspace); err != nil {
		return nil, nil, err
	}
	return w, func() { w.Close() }, nil
}

// resolveSpecImage makes sure the engine has the image spec asks for:
// the built-in image (built when missing, unless noBuild), or the
// reference, Dockerfile or devcontainer.json spec.Image names (pulled
// unless noBuild, or built as needed). Progress and notices go to
// spec.Progress.
func (e *Engine) resolveSpecImage(ctx context.Context, spec sandbox.Spec, noBuild bool) (ResolvedImage, error) {
	progress := cmp.Or[io.Writer](spec.Progress, io.Discard)
	if spec.Image == "" {
		ok, err := e.ImageExists(ctx, images.Tag())
		switch {
		case err != nil:
			return ResolvedImage{}, err
		case !ok && noBuild:
			return ResolvedImage{}, &UnavailableImageError{Ref: images.Tag()}
		case !ok:
			fmt.Fprintf(progress, "building the sandbox image %s (once)\n", images.Tag())
			if err := e.BuildDefaultImageAuto(ctx, BuildOptions{Progress: progress}); err != nil {
				return ResolvedImage{}, err
			}
		}
		return Reference(images.Tag()), nil
	}
	secrets, err := sandbox.ParseBuildSecrets(spec.BuildSecrets)
	if err != nil {
		return ResolvedImage{}, err
	}
	return e.ResolveImage(ctx, ImageRequest{
		Spec:        spec.Image,
		Workspace:   spec.Workspace,
		Root:        spec.Opened.Root(),
		FromProject: spec.ImageFromProject,
		NoPull:      noBuild,
		Pull:        spec.Pull,
		Progress:    progress,
		Build:       BuildLimits{Network: spec.Network, Memory: spec.Memory, CPUs: spec.CPUs},
		Secrets:     secrets,
		LookupEnv:   spec.LookupEnv,
	})
}

// ownedEngine closes the engine connection with the session, and the
// workspace when the sandbox opened it.
type ownedEngine struct {
	*Sandbox
	eng  *Engine
	done func()
	// stopCheck ends the tag check if it is still asking.
	stopCheck func()
}

func (o *ownedEngine) Close() error {
	o.stopCheck()
	err := o.Sandbox.Close()
	o.eng.Close()
	o.done()
	return err
}

// PlanImage plans the settings' image as ResolveImage would resolve it.
func (backend) PlanImage(w *workspace.Workspace, s sandbox.Settings) (sandbox.ImagePlan, error) {
	plan, err := PlanImage(ImageRequest{Spec: s.Image, Workspace: w.Path(), Root: w.Root(), FromProject: s.ImageFromProject})
	plan.BuildNetwork = sandbox.NetworkNone
	if BuildNetwork(s.Network) != "none" {
		plan.BuildNetwork = sandbox.NetworkOpen
	}
	return plan, err
}

// BuildImage builds the built-in image on the default engine.
func (backend) BuildImage(ctx context.Context, b sandbox.ImageBuild) (string, error) {
	eng, err := Connect(ctx)
	if err != nil {
		return "", err
	}
	defer eng.Close()
	if b.IfMissing {
		ok, err := eng.ImageExists(ctx, images.Tag())
		if err != nil || ok {
			return images.Tag(), err
		}
	}
	bo := BuildOptions{Progress: b.Progress, Offline: b.Offline}
	if b.Offline || b.Online {
		err = eng.BuildDefaultImage(ctx, bo)
	} else {
		err = eng.BuildDefaultImageAuto(ctx, bo)
	}
	return images.Tag(), err
}

// Manage connects to the default engine.
func (backend) Manage(ctx context.Context, _ sandbox.Settings) (sandbox.Manager, error) {
	eng, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	return manager{eng}, nil
}

// manager is `shiro sandbox` on one engine.
type manager struct{ e *Engine }

func (m manager) Close() error { return m.e.Close() }

// EngineMemory is the memory of the engine's host, in bytes: what every
// container's memory limit together must fit in (--parallel checks it).
func (m manager) EngineMemory(ctx context.Context) (int64, error) {
	info, err := m.e.Info(ctx)
	return info.Memory, err
}

func (m manager) List(ctx context.Context, ws string) ([]sandbox.Entry, error) {
	list, err := m.e.List(ctx, ws)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Entry, 0, len(list))
	for _, c := range list {
		out = append(out, sandbox.Entry{Backend: sandbox.BackendDocker, Workspace: c.Workspace, Name: c.Container, ID: c.ID,
			Image: c.Image, State: c.State, Created: c.Created, LastUsed: c.LastUsed, Orphaned: c.Orphaned})
	}
	return out, nil
}

// act stops (or removes) the containers of ws, the running ones only for
// a stop.
func (m manager) act(ctx context.Context, ws string, remove bool, report func(sandbox.Item)) error {
	list, err := m.e.List(ctx, ws)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		if remove || c.State == "running" {
			ids = append(ids, c.ID)
			report(sandbox.Item{Kind: "container", Name: c.Container, Workspace: c.Workspace, State: c.State})
		}
	}
	if remove {
		return m.e.Remove(ctx, ids...)
	}
	return m.e.Stop(ctx, ids...)
}

func (m manager) Stop(ctx context.Context, ws string, report func(sandbox.Item)) error {
	return m.act(ctx, ws, false, report)
}

func (m manager) Remove(ctx context.Context, ws string, report func(sandbox.Item)) error {
	return m.act(ctx, ws, true, report)
}

func (m manager) Prune(ctx context.Context, dryRun bool, report func(sandbox.Item)) error {
	rep, err := m.e.Prune(ctx, dryRun)
	for _, c := range rep.Containers {
		report(sandbox.Item{Kind: "container", Name: c.Container, Workspace: c.Workspace, State: c.State})
	}
	for _, v := range rep.Volumes {
		report(sandbox.Item{Kind: "volume", Name: v})
	}
	return err
}

// Doctor checks the engine, the image, its tools and how the sandbox
// holds the workspace, each needing the one before.
func (backend) Doctor(ctx context.Context, spec sandbox.Spec, r sandbox.Report) {
	w, done, err := openedWorkspace(spec)
	if err != nil {
		for _, name := range []string{"engine", "image", "tools", "workspace"} {
			r.Fail(name, "not checked: "+err.Error(), "")
		}
		return
	}
	defer done()
	spec.Opened = w
	eng, err := Connect(ctx)
	var unreachable *UnreachableError
	if errors.As(err, &unreachable) {
		why := unreachable.Why
		if why == "" {
			why = unreachable.Err.Error()
		}
		r.Fail("engine", "cannot reach the Docker engine at "+unreachable.Host+" (DOCKER_HOST="+unreachable.hostSetting()+"): "+why,
			unreachable.FixText()+"; or, only in a repository you trust, run with --no-sandbox (it gives up the isolation: commands run on this machine as you)")
		for _, name := range []string{"image", "tools", "workspace"} {
			r.Fail(name, "not checked: no engine", "")
		}
		return
	}
	if err != nil {
		r.Fail("engine", err.Error(), "")
		for _, name := range []string{"image", "tools", "workspace"} {
			r.Fail(name, "not checked: no engine", "")
		}
		return
	}
	defer eng.Close()
	info, err := eng.Info(ctx)
	if err != nil {
		r.Fail("engine", err.Error(), "check that DOCKER_HOST points at a Docker engine")
	} else {
		mode := "rootful"
		switch {
		case info.Rootless:
			mode = "rootless"
		case info.UserNS:
			mode = "rootful with user namespace remapping"
		}
		r.OK("engine", "Docker %s (API %s, %s) at %s", info.ServerVersion, info.APIVersion, mode, info.Host)
	}

	img, ok := eng.checkImage(ctx, spec, r)
	if !ok {
		r.Fail("tools", "not checked: no image", "")
		r.Fail("workspace", "not checked: no image", "")
		return
	}
	sb, err := eng.Open(ctx, img, Options{Spec: spec})
	if err != nil {
		r.Fail("tools", "cannot open the sandbox: "+err.Error(), "")
		r.Fail("workspace", "not checked: no sandbox", "")
		return
	}
	defer sb.Close()
	checks.Tools(ctx, sb, r)
	switch {
	case sb.Info().Copy:
		why := "--workspace copy"
		if !eng.Local() {
			why = "the engine is not on this machine"
		}
		checks.Copy(ctx, sb, w, why, r)
	case checks.Workspace(ctx, sb, w, r):
		for _, p := range sb.Protections(ctx) {
			if p.OK {
				r.OK(p.Name, "%s", p.Detail)
			} else {
				r.Fail(p.Name, p.Detail, p.Fix)
			}
		}
	}
	r.OK("sandbox", "network %s, memory %s, %g CPUs, %d processes", describeNetwork(spec.Network),
		formatSize(cmp.Or(spec.Memory, DefaultMemory)), cmp.Or(spec.CPUs, DefaultCPUs), cmp.Or(spec.Pids, DefaultPids))
}

// describeNetwork says which network mode is active and what it means.
func describeNetwork(n string) string {
	switch cmp.Or(n, DefaultNetwork) {
	case NetworkAsk:
		return "ask (every connection through shiro's proxy)"
	case NetworkOpen, "bridge":
		return "open (Docker's bridge: the host, the LAN and the internet are reachable)"
	}
	return n
}

// checkImage finds the image without pulling it or building the built-in
// one; a project's Dockerfile or devcontainer.json is built when it
// changed, as a session would, since a build that fails is what there is
// to know.
func (e *Engine) checkImage(ctx context.Context, spec sandbox.Spec, r sandbox.Report) (ResolvedImage, bool) {
	img, err := e.resolveSpecImage(ctx, spec, true)
	if err != nil {
		var missing *UnavailableImageError
		switch {
		case errors.As(err, &missing) && spec.Image == "":
			r.Fail("image", "the built-in image "+missing.Ref+" is not present", "run `shiro image build` (or just start shiro: it builds it)")
		case errors.As(err, &missing):
			r.Fail("image", missing.Ref+" is not present locally", "`shiro image pull "+missing.Ref+"` (shiro pulls it when it starts, with the registry's credentials from the docker config), `docker load`, or --image with a Dockerfile")
		default:
			r.Fail("image", err.Error(), "")
		}
		return img, false
	}
	desc, err := e.DescribeImage(ctx, img.Ref)
	if err != nil {
		r.Fail("image", err.Error(), "")
		return img, false
	}
	r.OK("image", "%s", desc)
	return img, true
}
