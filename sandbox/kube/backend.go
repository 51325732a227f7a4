package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	wspace "github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/checks"
)

// Backend is a Kubernetes cluster as a sandbox backend: a pod and a claim
// per workspace in the namespace of the settings' kube context.
func Backend() sandbox.Backend { return backend{} }

type backend struct{}

func (backend) Name() string { return sandbox.BackendKubernetes }

// DefaultWorkspaceMode is copy: a pod cannot mount this machine's
// directory.
func (backend) DefaultWorkspaceMode(sandbox.Settings) string { return sandbox.WorkspaceCopy }

// errMount refuses --workspace mount.
var errMount = errors.New("the kubernetes backend cannot mount the workspace directory (--workspace mount): its pods hold a copy (--workspace copy)")

// connect reaches the cluster of the settings' kube context and namespace
// (the kubeconfig's current ones when empty).
func connect(ctx context.Context, s sandbox.Settings) (*Cluster, error) {
	return Connect(ctx, ConnectOptions{Context: s.KubeContext, Namespace: s.Namespace})
}

// Open opens the workspace's pod session. The image is a reference the
// cluster has or can pull (the built-in image's tag when empty); the
// workspace on the pod's claim starts empty (the copy mode puts it there).
func (backend) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := spec.CheckEnv(); err != nil {
		return nil, err
	}
	if spec.WorkspaceMode == sandbox.WorkspaceMount {
		return nil, errMount
	}
	c, err := connect(ctx, spec.Settings)
	if err != nil {
		return nil, err
	}
	return c.Open(ctx, Options{Spec: spec})
}

// PlanImage plans an image reference; anything else needs a build this
// backend cannot do (ImageError).
func (backend) PlanImage(_ *wspace.Workspace, s sandbox.Settings) (sandbox.ImagePlan, error) {
	kind, ref := sandbox.ClassifyImage(s.Image)
	if kind == sandbox.KindReference {
		return sandbox.ImagePlan{Kind: kind, Ref: ref}, nil
	}
	return sandbox.ImagePlan{Kind: kind}, CheckImage(s.Image)
}

// BuildImage refuses: the nodes pull images, and this backend has no
// registry to push a build to.
func (backend) BuildImage(context.Context, sandbox.ImageBuild) (string, error) {
	return "", errors.New("the kubernetes backend builds no images: its nodes run images they have or can pull (build the built-in image with `shiro --backend docker image build`, then push it or import it on the nodes)")
}

// Manage connects to the cluster the settings choose.
func (backend) Manage(ctx context.Context, s sandbox.Settings) (sandbox.Manager, error) {
	c, err := connect(ctx, s)
	if err != nil {
		return nil, err
	}
	return manager{c}, nil
}

// manager is `shiro sandbox` on one namespace.
type manager struct{ c *Cluster }

func (manager) Close() error { return nil }

func (m manager) List(ctx context.Context, ws string) ([]sandbox.Entry, error) {
	pods, err := m.c.List(ctx, ws)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Entry, 0, len(pods))
	for _, p := range pods {
		out = append(out, sandbox.Entry{Backend: sandbox.BackendKubernetes, Workspace: p.Workspace, Name: p.Pod,
			Shown: "pod/" + p.Namespace + "/" + p.Pod, Namespace: p.Namespace, Claim: p.Claim,
			Image: p.Image, State: p.State, Created: p.Created, Orphaned: p.Orphaned})
	}
	return out, nil
}

// Stop deletes the running and starting pods of ws: a pod stops by being
// deleted, and the claim keeps the workspace's copy and HOME.
func (m manager) Stop(ctx context.Context, ws string, report func(sandbox.Item)) error {
	names, err := m.pods(ctx, ws, false, report)
	if err != nil {
		return err
	}
	return m.c.Stop(ctx, names...)
}

// Remove deletes the pods of ws and their claims (the workspace's copy in
// the cluster and its HOME).
func (m manager) Remove(ctx context.Context, ws string, report func(sandbox.Item)) error {
	names, err := m.pods(ctx, ws, true, report)
	if err != nil {
		return err
	}
	err = m.c.Remove(ctx, names...)
	claims, cerr := m.c.RemoveClaims(ctx, ws)
	for _, c := range claims {
		report(sandbox.Item{Kind: "claim", Name: m.c.Namespace() + "/" + c})
	}
	return errors.Join(err, cerr)
}

// pods reports and names the pods of ws to stop (running or starting) or
// remove (all).
func (m manager) pods(ctx context.Context, ws string, all bool, report func(sandbox.Item)) ([]string, error) {
	pods, err := m.c.List(ctx, ws)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pods {
		if all || p.State == StateRunning || p.State == StatePending {
			names = append(names, p.Pod)
			report(sandbox.Item{Kind: "pod", Name: p.Namespace + "/" + p.Pod, Workspace: p.Workspace, State: p.State})
		}
	}
	return names, nil
}

func (m manager) Prune(ctx context.Context, dryRun bool, report func(sandbox.Item)) error {
	rep, err := m.c.Prune(ctx, dryRun)
	for _, p := range rep.Pods {
		report(sandbox.Item{Kind: "pod", Name: p.Namespace + "/" + p.Pod, Workspace: p.Workspace, State: p.State})
	}
	for _, c := range rep.Claims {
		report(sandbox.Item{Kind: "claim", Name: m.c.Namespace() + "/" + c})
	}
	for _, c := range rep.ConfigMaps {
		report(sandbox.Item{Kind: "config map", Name: m.c.Namespace() + "/" + c})
	}
	return err
}

// Doctor checks the cluster and namespace, the user's rights there, the
// storage, a sandbox pod and what runs in it, and what the network mode
// can promise on this cluster.
func (b backend) Doctor(ctx context.Context, spec sandbox.Spec, r sandbox.Report) {
	c, err := connect(ctx, spec.Settings)
	if err != nil {
		r.Fail("cluster", err.Error(), "check the kubeconfig (KUBECONFIG, --kube-context) and that the API server answers")
		for _, name := range []string{"rights", "storage", "tools", "pod"} {
			r.Fail(name, "not checked: no cluster", "")
		}
		return
	}
	v, _ := c.Version(ctx)
	r.OK("cluster", "Kubernetes %s at %s (context %s), namespace %s", v, c.Server(), c.Context(), c.Namespace())
	missing, err := c.MissingRights(ctx)
	switch {
	case err != nil:
		r.Fail("rights", err.Error(), "")
	case len(missing) > 0:
		var names []string
		for _, m := range missing {
			names = append(names, m.String())
		}
		r.Fail("rights", fmt.Sprintf("you may not %s in %s", strings.Join(names, ", "), c.Namespace()),
			"bind the Role docs/kubernetes.md lists to your user in the namespace")
	default:
		r.OK("rights", "you may manage pods, pods/exec, claims, config maps and network policies in %s", c.Namespace())
	}
	checkStorage(ctx, c, spec.StorageClass, r)
	switch spec.Network {
	case "", sandbox.NetworkAsk, sandbox.NetworkNone:
		network := spec.Network
		if network == "" {
			network = sandbox.NetworkAsk
		}
		r.OK("network", "%s: a NetworkPolicy denies the pod's own traffic, which holds only where the cluster's network plugin enforces NetworkPolicy (not every plugin does); in ask mode connections go through shiro's proxy over the exec", network)
	default:
		r.OK("network", "open: the pod has the cluster's pod network")
	}
	var sb *Sandbox
	err = errMount
	if spec.WorkspaceMode != sandbox.WorkspaceMount {
		sb, err = c.Open(ctx, Options{Spec: spec})
	}
	if err != nil {
		r.Fail("tools", "cannot open the sandbox: "+err.Error(), "")
		r.Fail("pod", "not checked: no sandbox", "")
		return
	}
	defer sb.Close()
	checks.Tools(ctx, sb, r)
	problems, err := sb.Check(ctx)
	switch {
	case err != nil:
		r.Fail("pod", err.Error(), "")
	case problems != "":
		r.Fail("pod", fmt.Sprintf("the pod %s: %s", sb.Pod(), problems), "shiro sandbox rm, then start again")
	default:
		r.OK("pod", "%s runs as you, no capabilities, no-new-privileges, no service account token; the helper is read-only (claim %s)", sb.Pod(), sb.Claim())
	}
}

// checkStorage says which StorageClass the workspace's claim gets, or why
// it would never be bound.
func checkStorage(ctx context.Context, c *Cluster, named string, r sandbox.Report) {
	class, err := c.StorageClass(ctx, named)
	switch {
	case errors.Is(err, ErrStorageUnknown):
		r.OK("storage", "the StorageClass %s is not checked: %v", class, err)
	case err != nil:
		r.Fail("storage", err.Error(), "name a class the cluster has with --storage-class or sandbox.kubernetes.storageClass")
	case named == "":
		r.OK("storage", "the workspace's claim gets the cluster's default StorageClass, %s", class)
	default:
		r.OK("storage", "the workspace's claim gets the StorageClass %s", class)
	}
}
