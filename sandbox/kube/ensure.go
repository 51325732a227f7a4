package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/shiroagent/shiro/sandbox/owner"
)

// ensurePod returns the name of the plan's pod once it runs: the one that
// exists when it passes the check, else a new one. A pod that ended (its
// helper stopped it when idle) is deleted and made again; its claim keeps
// the workspace and HOME. A pod under the plan's name that fails the check
// is left alone, with a notice, and another name is used.
func (c *Cluster) ensurePod(ctx context.Context, p plan, h helperBinary, opts Options) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	name := p.name
	for attempt := 0; ; attempt++ {
		pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if err := c.prepare(ctx, p, h, opts); err != nil {
				return "", err
			}
			fmt.Fprintf(opts.Progress, "creating sandbox pod %s/%s\n", c.ns, name)
			obj := p.pod.DeepCopy()
			obj.Name = name
			obj.Labels[LabelOwner] = owner.Token(c.key, "pod", name, p.spec.Workspace, p.spec.hash())
			pod, err = c.cs.CoreV1().Pods(c.ns).Create(ctx, obj, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) { // another shiro made it first
				continue
			}
			if err != nil {
				return "", fmt.Errorf("create pod %s: %w", name, err)
			}
		case err != nil:
			return "", fmt.Errorf("get pod %s: %w", name, err)
		}
		if why := c.mismatch(pod, p); why != "" {
			if attempt > 3 {
				return "", fmt.Errorf("pod %s: %s", name, why)
			}
			opts.Notices(fmt.Sprintf("the pod named %s is not one shiro would make (%s); it is left alone and another is used", name, why))
			name = p.name + "-" + suffix()
			continue
		}
		switch pod.Status.Phase {
		case corev1.PodSucceeded, corev1.PodFailed:
			// It ended: idle, or its node went away. Its claim stays.
			if err := c.deletePod(ctx, pod); err != nil {
				return "", err
			}
			continue
		}
		if pod.DeletionTimestamp != nil {
			if err := c.waitGone(ctx, pod); err != nil {
				return "", err
			}
			continue
		}
		if err := c.waitRunning(ctx, pod, p); err != nil {
			return "", err
		}
		return name, nil
	}
}

// prepare makes what a new pod needs: the helper's config maps, the
// workspace's claim and, for a closed network, the namespace's policy.
func (c *Cluster) prepare(ctx context.Context, p plan, h helperBinary, opts Options) error {
	if err := c.ensureChunks(ctx, h); err != nil {
		return err
	}
	if err := c.ensureClaim(ctx, p, opts); err != nil {
		return err
	}
	if p.spec.closed() {
		if err := c.ensurePolicy(ctx); err != nil {
			return err
		}
	}
	return nil
}

// claimObject is the workspace's claim as shiro makes it.
func claimObject(key []byte, ns string, p plan, opts Options) *corev1.PersistentVolumeClaim {
	ws := p.spec.Workspace
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:      p.claim,
			Namespace: ns,
			Labels: map[string]string{
				LabelManaged:   "true",
				LabelWorkspace: owner.WorkspaceKey(ws),
				LabelOwner:     owner.Token(key, "claim", p.claim, ws, ""),
			},
			Annotations: map[string]string{AnnotationWorkspace: ws},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(opts.ClaimSize, resource.BinarySI)},
			},
		},
	}
	if class := opts.StorageClass; class != "" {
		pvc.Spec.StorageClassName = &class
	}
	return pvc
}

// ensureClaim makes the workspace's claim, or checks the one that exists
// is this user's: a planted claim would give the sandbox a HOME (and a
// ~/.profile) someone else wrote.
func (c *Cluster) ensureClaim(ctx context.Context, p plan, opts Options) error {
	api := c.cs.CoreV1().PersistentVolumeClaims(c.ns)
	want := claimObject(c.key, c.ns, p, opts)
	got, err := api.Get(ctx, p.claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if err := c.checkStorage(ctx, opts.StorageClass); err != nil {
			return err
		}
		got, err = api.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = api.Get(ctx, p.claim, metav1.GetOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("the workspace's claim %s: %w", p.claim, err)
	}
	if !c.ownsClaim(got) {
		return fmt.Errorf("the claim %s exists but shiro did not make it for you; look at what it holds, then remove it (kubectl delete pvc %s -n %s)", p.claim, p.claim, c.ns)
	}
	if got.DeletionTimestamp != nil {
		return fmt.Errorf("the claim %s is being deleted (shiro sandbox rm?); start again once it is gone", p.claim)
	}
	return nil
}

func (c *Cluster) ownsClaim(pvc *corev1.PersistentVolumeClaim) bool {
	ws := pvc.Annotations[AnnotationWorkspace]
	return pvc.Labels[LabelManaged] == "true" && ws != "" && pvc.Labels[LabelWorkspace] == owner.WorkspaceKey(ws) &&
		owner.Valid(c.key, pvc.Labels[LabelOwner], "claim", pvc.Name, ws, "")
}

func (c *Cluster) ownsPod(pod *corev1.Pod) bool {
	ws := pod.Annotations[AnnotationWorkspace]
	cfg := pod.Labels[LabelConfig]
	return pod.Labels[LabelManaged] == "true" && ws != "" && cfg != "" && pod.Labels[LabelWorkspace] == owner.WorkspaceKey(ws) &&
		owner.Valid(c.key, pod.Labels[LabelOwner], "pod", pod.Name, ws, cfg)
}

// policyName is the namespace's NetworkPolicy that closes the network of
// shiro's ask- and none-mode pods.
const policyName = "shiro-sandbox-closed"

// policyObject denies every connection to and from the pods labelled
// closed. It holds only where the cluster's network plugin enforces
// NetworkPolicy; the exec streams (and so the egress proxy's tunnel) are
// not pod traffic and are not affected.
func policyObject(key []byte, ns string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      policyName,
			Namespace: ns,
			Labels: map[string]string{
				LabelManaged: "true",
				LabelOwner:   owner.Token(key, "networkpolicy", policyName, "", ""),
			},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManaged: "true", LabelNetwork: closedNetwork}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// ensurePolicy makes the namespace's policy, or checks the one under its
// name denies everything to the same pods.
func (c *Cluster) ensurePolicy(ctx context.Context) error {
	api := c.cs.NetworkingV1().NetworkPolicies(c.ns)
	want := policyObject(c.key, c.ns)
	got, err := api.Get(ctx, policyName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		got, err = api.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = api.Get(ctx, policyName, metav1.GetOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("the network policy %s that closes the sandbox's network: %w", policyName, err)
	}
	s := got.Spec
	if len(s.Ingress) > 0 || len(s.Egress) > 0 || !slices.Contains(s.PolicyTypes, networkingv1.PolicyTypeEgress) ||
		!slices.Contains(s.PolicyTypes, networkingv1.PolicyTypeIngress) || len(s.PodSelector.MatchExpressions) > 0 ||
		len(s.PodSelector.MatchLabels) != 2 || s.PodSelector.MatchLabels[LabelNetwork] != closedNetwork || s.PodSelector.MatchLabels[LabelManaged] != "true" {
		return fmt.Errorf("the network policy %s exists but does not deny all traffic of shiro's closed pods; remove it (kubectl delete networkpolicy %s -n %s)", policyName, policyName, c.ns)
	}
	return nil
}

// deletePod deletes pod (by its uid: never a successor of the same name)
// and waits until it is gone: with the pod's grace period, so that the
// kubelet has stopped its containers by then (a pod deleted at once
// leaves its processes running on the node for a while, still writing
// the claim).
func (c *Cluster) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := c.cs.CoreV1().Pods(c.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	return c.waitGone(ctx, pod)
}

// watchPod calls check with every state of the pod (by name) until check
// returns true or an error, or ctx ends. check sees nil once it is gone.
func (c *Cluster) watchPod(ctx context.Context, name string, check func(*corev1.Pod) (bool, error)) error {
	api := c.cs.CoreV1().Pods(c.ns)
	for {
		list, err := api.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			return fmt.Errorf("watch pod %s: %w", name, err)
		}
		var pod *corev1.Pod
		if len(list.Items) > 0 {
			pod = &list.Items[0]
		}
		if done, err := check(pod); done || err != nil {
			return err
		}
		w, err := api.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: list.ResourceVersion,
		})
		if err != nil {
			return fmt.Errorf("watch pod %s: %w", name, err)
		}
		done, err := func() (bool, error) {
			defer w.Stop()
			for ev := range w.ResultChan() {
				switch ev.Type {
				case watch.Deleted:
					return check(nil)
				case watch.Added, watch.Modified:
					if p, ok := ev.Object.(*corev1.Pod); ok {
						if done, err := check(p); done || err != nil {
							return done, err
						}
					}
				case watch.Error:
					return false, nil // list again
				}
			}
			return false, nil
		}()
		if done || err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("watch pod %s: %w", name, err)
		}
	}
}

// waitGone waits until pod (this uid) no longer exists.
func (c *Cluster) waitGone(ctx context.Context, pod *corev1.Pod) error {
	err := c.watchPod(ctx, pod.Name, func(p *corev1.Pod) (bool, error) {
		return p == nil || p.UID != pod.UID, nil
	})
	if err != nil {
		return fmt.Errorf("wait for pod %s to go: %w", pod.Name, err)
	}
	return nil
}

// waitRunning waits until the pod's sandbox container runs, and says why
// when it cannot: the setup failed, the image cannot be had, the pod
// ended.
func (c *Cluster) waitRunning(ctx context.Context, pod *corev1.Pod, p plan) error {
	var last *corev1.Pod
	err := c.watchPod(ctx, pod.Name, func(cur *corev1.Pod) (bool, error) {
		if cur == nil || cur.UID != pod.UID {
			return false, fmt.Errorf("pod %s was deleted while it started", pod.Name)
		}
		last = cur
		return podStarted(cur, p.spec.Image)
	})
	if err != nil && ctx.Err() != nil && last != nil {
		why := pendingReason(last)
		if claim := c.claimPending(ctx, p.claim); claim != "" {
			why = claim + "; " + why
		}
		return fmt.Errorf("pod %s did not start within the start timeout: %s", pod.Name, why)
	}
	return err
}

// podStarted says whether the sandbox container runs, or why it never
// will.
func podStarted(pod *corev1.Pod, image string) (bool, error) {
	for _, st := range pod.Status.InitContainerStatuses {
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
			return false, fmt.Errorf("the sandbox pod %s's setup failed (exit %d): %s (the image needs sh, cat, chmod and mkdir)",
				pod.Name, t.ExitCode, strings.TrimSpace(t.Message))
		}
		if err := waitingError(pod.Name, st.State.Waiting, image); err != nil {
			return false, err
		}
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name != mainContainer {
			continue
		}
		if st.State.Running != nil {
			return true, nil
		}
		if t := st.State.Terminated; t != nil {
			return false, fmt.Errorf("the sandbox pod %s ended as it started (exit %d, %s): %s", pod.Name, t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
		}
		if err := waitingError(pod.Name, st.State.Waiting, image); err != nil {
			return false, err
		}
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false, fmt.Errorf("the sandbox pod %s ended as it started (%s): %s", pod.Name, pod.Status.Phase, pod.Status.Message)
	}
	return false, nil
}

// waitingError turns the waiting reasons that do not pass by themselves
// into errors.
func waitingError(pod string, w *corev1.ContainerStateWaiting, image string) error {
	if w == nil {
		return nil
	}
	switch w.Reason {
	case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
		return &PullError{Pod: pod, Image: image, Reason: w.Reason, Message: w.Message}
	case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return fmt.Errorf("the sandbox pod %s cannot start its container (%s): %s", pod, w.Reason, w.Message)
	}
	return nil
}

// PullError says the cluster cannot run the image: it has it not and
// cannot pull it.
type PullError struct{ Pod, Image, Reason, Message string }

func (e *PullError) Error() string {
	return fmt.Sprintf("the cluster cannot get the image %s for the sandbox pod %s (%s: %s): the kubernetes backend runs images its nodes have or can pull; push the image to a registry the cluster pulls from (or load it into the nodes' container runtime), or choose another with --image",
		e.Image, e.Pod, e.Reason, e.Message)
}

// pendingReason says what a pod that does not start waits for.
func pendingReason(pod *corev1.Pod) string {
	var why []string
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			why = append(why, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	for _, st := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil && w.Reason != "" {
			why = append(why, fmt.Sprintf("%s: %s %s", st.Name, w.Reason, w.Message))
		}
	}
	if len(why) == 0 {
		return "phase " + string(pod.Status.Phase)
	}
	return strings.Join(why, "; ")
}

// mismatch says how an existing pod differs from what the plan would make,
// or "" when it may be used: who made it and what it runs, as whom, with
// which privileges, mounts and limits. The API server fills defaults into
// what it stores; only what shiro sets is compared.
func (c *Cluster) mismatch(pod *corev1.Pod, p plan) string {
	if !c.ownsPod(pod) {
		return "it does not carry this user's shiro owner label"
	}
	if pod.Labels[LabelConfig] != p.spec.hash() {
		return "its settings differ"
	}
	want := facts(p.pod)
	got := facts(pod)
	for _, k := range sortedKeys(want, got) {
		if want[k] != got[k] {
			return fmt.Sprintf("its %s is %q, not %q", k, got[k], want[k])
		}
	}
	return ""
}

// facts are the parts of a pod that shiro decides, as strings.
func facts(pod *corev1.Pod) map[string]string {
	s := pod.Spec
	f := map[string]string{
		"host namespaces":          fmt.Sprint(s.HostNetwork, s.HostPID, s.HostIPC, s.HostUsers),
		"shared process namespace": fmt.Sprint(deref(s.ShareProcessNamespace)),
		"service account token":    fmt.Sprint(deref(s.AutomountServiceAccountToken)),
		"restart policy":           string(s.RestartPolicy),
		"containers":               fmt.Sprint(len(s.Containers), len(s.InitContainers), len(s.EphemeralContainers)),
		"runtime class":            deref(s.RuntimeClassName),
	}
	if sc := s.SecurityContext; sc != nil {
		f["pod user"] = fmt.Sprint(deref(sc.RunAsUser), deref(sc.RunAsGroup), deref(sc.FSGroup), deref(sc.RunAsNonRoot), sc.SupplementalGroups)
		f["pod seccomp"] = seccomp(sc.SeccompProfile)
		f["sysctls"] = fmt.Sprint(sc.Sysctls)
	}
	for _, v := range s.Volumes {
		f["volume "+v.Name] = volumeFact(v)
	}
	add := func(kind string, c corev1.Container) {
		k := kind + " " + c.Name
		f[k+" image"] = c.Image
		f[k+" command"] = fmt.Sprintf("%q %q", c.Command, c.Args)
		f[k+" working dir"] = c.WorkingDir
		f[k+" environment"] = fmt.Sprint(c.Env, c.EnvFrom)
		lim := c.Resources.Limits
		f[k+" limits"] = lim.Memory().String() + " " + lim.Cpu().String()
		var mounts []string
		for _, m := range c.VolumeMounts {
			mounts = append(mounts, fmt.Sprintf("%s:%s:%s:%t", m.Name, m.MountPath, m.SubPath, m.ReadOnly))
		}
		slices.Sort(mounts)
		f[k+" mounts"] = strings.Join(mounts, " ")
		if sc := c.SecurityContext; sc != nil {
			var caps string
			if sc.Capabilities != nil {
				caps = fmt.Sprint(sc.Capabilities.Add, sc.Capabilities.Drop)
			}
			f[k+" security"] = fmt.Sprint(deref(sc.RunAsUser), deref(sc.RunAsGroup), deref(sc.RunAsNonRoot), deref(sc.Privileged),
				deref(sc.AllowPrivilegeEscalation), caps, deref(sc.ProcMount), seccomp(sc.SeccompProfile))
		} else {
			f[k+" security"] = "none"
		}
	}
	for _, c := range s.InitContainers {
		add("init container", c)
	}
	for _, c := range s.Containers {
		add("container", c)
	}
	return f
}

func volumeFact(v corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return "claim " + v.PersistentVolumeClaim.ClaimName + fmt.Sprint(v.PersistentVolumeClaim.ReadOnly)
	case v.EmptyDir != nil:
		size := ""
		if v.EmptyDir.SizeLimit != nil {
			size = v.EmptyDir.SizeLimit.String()
		}
		return "emptyDir " + string(v.EmptyDir.Medium) + " " + size
	case v.Projected != nil:
		var names []string
		for _, src := range v.Projected.Sources {
			if src.ConfigMap == nil {
				return "projected: not only config maps"
			}
			names = append(names, src.ConfigMap.Name)
		}
		return "config maps " + strings.Join(names, " ")
	}
	return "another kind of volume"
}

func seccomp(p *corev1.SeccompProfile) string {
	if p == nil {
		return ""
	}
	return string(p.Type) + deref(p.LocalhostProfile)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func sortedKeys(maps ...map[string]string) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// podEnd says how the pod name ended, as far as the API server knows, in
// parentheses after a space ("" when it cannot tell): the sandbox
// container's exit (an OOM kill shows as OOMKilled), an eviction, a
// deletion. The channel often closes before the kubelet has reported the
// container's end, so it asks again for a few seconds (its own, as the
// command's context may be ending) until the pod says why.
func (c *Cluster) podEnd(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for {
		pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return " (it was deleted)"
		}
		if err == nil {
			if why := podEndReason(pod); why != "" {
				return why
			}
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// podEndReason is podEnd's text for one reading of the pod, "" while the
// pod does not say it has ended.
func podEndReason(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return " (it is being deleted)"
	}
	for _, st := range pod.Status.ContainerStatuses {
		if t := st.State.Terminated; st.Name == mainContainer && t != nil {
			why := fmt.Sprintf(" (its container ended: exit %d, %s", t.ExitCode, t.Reason)
			if m := strings.TrimSpace(t.Message); m != "" {
				why += ": " + m
			}
			return why + ")"
		}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		why := fmt.Sprintf(" (the pod %s", pod.Status.Phase)
		if pod.Status.Reason != "" {
			why += ", " + pod.Status.Reason
		}
		if m := strings.TrimSpace(pod.Status.Message); m != "" {
			why += ": " + m
		}
		return why + ")"
	}
	return ""
}
