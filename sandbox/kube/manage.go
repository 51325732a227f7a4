package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shiroagent/shiro/sandbox/owner"
)

// PodInfo describes one of shiro's pods for `shiro sandbox ls`.
type PodInfo struct {
	Workspace string    `json:"workspace"`
	Pod       string    `json:"container"`
	Namespace string    `json:"namespace"`
	Claim     string    `json:"claim"`
	Image     string    `json:"image"`
	State     string    `json:"state"`
	Created   time.Time `json:"created"`
	// Orphaned is set when the workspace directory no longer exists.
	Orphaned bool `json:"orphaned,omitempty"`
}

// States a pod is listed in.
const (
	StateRunning = "running"
	StatePending = "starting"
	StateExited  = "exited" // its helper stopped it when idle, or it failed
)

func podState(p *corev1.Pod) string {
	switch {
	case p.DeletionTimestamp != nil:
		return "deleting"
	case p.Status.Phase == corev1.PodRunning:
		return StateRunning
	case p.Status.Phase == corev1.PodSucceeded, p.Status.Phase == corev1.PodFailed:
		return StateExited
	}
	return StatePending
}

func (c *Cluster) getPod(ctx context.Context, name string) (*corev1.Pod, error) {
	p, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pod %s: %w", name, err)
	}
	return p, nil
}

// selector lists what shiro made, for one workspace or (ws == "") all.
func selector(ws string) string {
	set := labels.Set{LabelManaged: "true"}
	if ws != "" {
		set[LabelWorkspace] = owner.WorkspaceKey(ws)
	}
	return set.String()
}

// ownPods lists the pods of this user's shiro.
func (c *Cluster) ownPods(ctx context.Context, ws string) ([]corev1.Pod, error) {
	list, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: selector(ws)})
	if err != nil {
		return nil, fmt.Errorf("list sandbox pods in %s: %w", c.ns, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if c.ownsPod(&p) && (ws == "" || p.Annotations[AnnotationWorkspace] == ws) {
			out = append(out, p)
		}
	}
	return out, nil
}

// ownClaims lists the claims of this user's shiro.
func (c *Cluster) ownClaims(ctx context.Context, ws string) ([]corev1.PersistentVolumeClaim, error) {
	list, err := c.cs.CoreV1().PersistentVolumeClaims(c.ns).List(ctx, metav1.ListOptions{LabelSelector: selector(ws)})
	if err != nil {
		return nil, fmt.Errorf("list sandbox claims in %s: %w", c.ns, err)
	}
	var out []corev1.PersistentVolumeClaim
	for _, p := range list.Items {
		if c.ownsClaim(&p) && (ws == "" || p.Annotations[AnnotationWorkspace] == ws) {
			out = append(out, p)
		}
	}
	return out, nil
}

// List returns shiro's pods, for one workspace or (ws == "") all. Only
// those carrying this user's owner label are listed.
func (c *Cluster) List(ctx context.Context, ws string) ([]PodInfo, error) {
	pods, err := c.ownPods(ctx, ws)
	if err != nil {
		return nil, err
	}
	out := make([]PodInfo, 0, len(pods))
	for _, p := range pods {
		info := PodInfo{
			Workspace: p.Annotations[AnnotationWorkspace],
			Pod:       p.Name,
			Namespace: p.Namespace,
			Claim:     p.Annotations[AnnotationClaim],
			Image:     p.Annotations[AnnotationImage],
			State:     podState(&p),
			Created:   p.CreationTimestamp.Time,
		}
		if _, err := os.Stat(info.Workspace); errors.Is(err, os.ErrNotExist) {
			info.Orphaned = true
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

// Stop deletes the named pods, which is how a pod stops: the claims stay,
// and the next session makes a pod again.
func (c *Cluster) Stop(ctx context.Context, pods ...string) error {
	var errs []error
	for _, name := range pods {
		p, err := c.ownedPod(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if p != nil {
			errs = append(errs, c.deletePod(ctx, p))
		}
	}
	return errors.Join(errs...)
}

// ownedPod gets a pod and refuses one that is not this user's; nil when
// it is gone.
func (c *Cluster) ownedPod(ctx context.Context, name string) (*corev1.Pod, error) {
	p, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get pod %s: %w", name, err)
	}
	if !c.ownsPod(p) {
		return nil, fmt.Errorf("pod %s is not one your shiro made; left alone", name)
	}
	return p, nil
}

// Remove deletes the named pods with their claims (the workspace's copy in
// the cluster and its HOME), unless another of this user's pods still uses
// a claim.
func (c *Cluster) Remove(ctx context.Context, pods ...string) error {
	var errs []error
	var claims []string
	for _, name := range pods {
		p, err := c.ownedPod(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if p == nil {
			continue
		}
		if err := c.deletePod(ctx, p); err != nil {
			errs = append(errs, err)
			continue
		}
		if cl := p.Annotations[AnnotationClaim]; cl != "" {
			claims = append(claims, cl)
		}
	}
	return errors.Join(append(errs, c.removeClaims(ctx, claims...))...)
}

// removeClaims deletes the named claims that are this user's and that no
// pod of the namespace uses.
func (c *Cluster) removeClaims(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	used, err := c.claimsInUse(ctx)
	if err != nil {
		return err
	}
	var errs []error
	api := c.cs.CoreV1().PersistentVolumeClaims(c.ns)
	for _, name := range names {
		if used[name] {
			continue
		}
		pvc, err := api.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("get claim %s: %w", name, err))
			continue
		}
		if !c.ownsClaim(pvc) {
			continue
		}
		err = api.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pvc.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete claim %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// claimsInUse are the claims the namespace's pods (anyone's) mount.
func (c *Cluster) claimsInUse(ctx context.Context) (map[string]bool, error) {
	list, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods in %s: %w", c.ns, err)
	}
	used := map[string]bool{}
	for _, p := range list.Items {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				used[v.PersistentVolumeClaim.ClaimName] = true
			}
		}
	}
	return used, nil
}

// PruneReport says what Prune removed (or would remove, on a dry run).
type PruneReport struct {
	Pods       []PodInfo `json:"pods"`
	Claims     []string  `json:"claims"`
	ConfigMaps []string  `json:"configMaps"`
}

// Prune removes the pods that ended (idle) and those whose workspace is
// gone, with their claims; claims no pod uses whose workspace is gone;
// and the helper's config maps no pod uses. Only what carries this user's
// owner label is touched.
func (c *Cluster) Prune(ctx context.Context, dryRun bool) (PruneReport, error) {
	var rep PruneReport
	all, err := c.List(ctx, "")
	if err != nil {
		return rep, err
	}
	for _, p := range all {
		if p.Orphaned || p.State == StateExited {
			rep.Pods = append(rep.Pods, p)
		}
	}
	claims, err := c.ownClaims(ctx, "")
	if err != nil {
		return rep, err
	}
	used, err := c.claimsInUse(ctx)
	if err != nil {
		return rep, err
	}
	pruned := map[string]bool{}
	for _, p := range rep.Pods {
		pruned[p.Claim] = true
	}
	for _, cl := range claims {
		_, err := os.Stat(cl.Annotations[AnnotationWorkspace])
		gone := errors.Is(err, os.ErrNotExist)
		if pruned[cl.Name] || (gone && !used[cl.Name]) {
			rep.Claims = append(rep.Claims, cl.Name)
		}
	}
	maps, err := c.unusedChunks(ctx)
	if err != nil {
		return rep, err
	}
	rep.ConfigMaps = maps
	if dryRun {
		return rep, nil
	}
	var errs []error
	for _, p := range rep.Pods {
		if pod, err := c.ownedPod(ctx, p.Pod); err != nil {
			errs = append(errs, err)
		} else if pod != nil {
			errs = append(errs, c.deletePod(ctx, pod))
		}
	}
	errs = append(errs, c.removeClaims(ctx, rep.Claims...))
	for _, name := range rep.ConfigMaps {
		err := c.cs.CoreV1().ConfigMaps(c.ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete config map %s: %w", name, err))
		}
	}
	return rep, errors.Join(errs...)
}

// helperMapsPage is how many helper config maps one list asks for: each
// holds up to a chunk (960 KiB) of a helper binary, and a namespace where
// many versions of shiro ran holds hundreds of them, more than one
// response body carries.
const helperMapsPage = 8

// helperMaps lists the helper config maps of the namespace (their
// metadata is all Prune needs; the data comes with it), a page at a time.
func (c *Cluster) helperMaps(ctx context.Context) ([]metav1.ObjectMeta, error) {
	var out []metav1.ObjectMeta
	opts := metav1.ListOptions{LabelSelector: LabelManaged + "=true," + LabelHelper, Limit: helperMapsPage}
	for {
		list, err := c.cs.CoreV1().ConfigMaps(c.ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list config maps in %s: %w", c.ns, err)
		}
		for _, cm := range list.Items {
			out = append(out, cm.ObjectMeta)
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// unusedChunks are this user's helper config maps that no pod of the
// namespace mounts.
func (c *Cluster) unusedChunks(ctx context.Context) ([]string, error) {
	maps, err := c.helperMaps(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods in %s: %w", c.ns, err)
	}
	used := map[string]bool{}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					used[src.ConfigMap.Name] = true
				}
			}
		}
	}
	var out []string
	for _, cm := range maps {
		h := cm.Labels[LabelHelper]
		if used[cm.Name] || !owner.Valid(c.key, cm.Labels[LabelOwner], "configmap", cm.Name, "", h) {
			continue
		}
		out = append(out, cm.Name)
	}
	sort.Strings(out)
	return out, nil
}

// RemoveClaims deletes this user's claims of a workspace (ws == "": of
// every workspace) that no pod uses, and returns their names.
func (c *Cluster) RemoveClaims(ctx context.Context, ws string) ([]string, error) {
	claims, err := c.ownClaims(ctx, ws)
	if err != nil {
		return nil, err
	}
	used, err := c.claimsInUse(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, cl := range claims {
		if !used[cl.Name] && cl.DeletionTimestamp == nil {
			names = append(names, cl.Name)
		}
	}
	return names, c.removeClaims(ctx, names...)
}
