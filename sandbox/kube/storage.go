package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// How the user names the workspace claim's StorageClass, for messages.
const storageClassHow = "--storage-class or sandbox.kubernetes.storageClass"

// StorageError is a claim that could not be bound: no class named and no
// default class in the cluster, or a named class that does not exist.
type StorageError struct {
	// Class is the class named; empty when none was.
	Class string
}

func (e *StorageError) Error() string {
	if e.Class == "" {
		return "the cluster has no default StorageClass, so the workspace's claim would never be bound; name a class with " +
			storageClassHow + " (kubectl get storageclass lists them)"
	}
	return fmt.Sprintf("the StorageClass %q does not exist in the cluster (named by %s; kubectl get storageclass lists those there are)", e.Class, storageClassHow)
}

// ErrStorageUnknown is returned by StorageClass when the user may not
// read StorageClasses (they are cluster-wide, and the namespace rights
// shiro needs do not include them): whether a named class exists is then
// known only from the claim's events.
var ErrStorageUnknown = errors.New("you may not read the cluster's StorageClasses (cluster-wide); whether the class exists shows only in the claim's events")

// StorageClass says which class the workspace's claim would get: the one
// named, once the cluster has it, or the cluster's default. The default is
// found without cluster-wide rights: a dry-run create of the claim goes
// through the API server's admission, which writes the default class into
// it (DefaultStorageClass) and stores nothing. A named class is looked up
// when the user may read classes; else ErrStorageUnknown is returned with
// the name.
func (c *Cluster) StorageClass(ctx context.Context, named string) (string, error) {
	if named != "" {
		_, err := c.cs.StorageV1().StorageClasses().Get(ctx, named, metav1.GetOptions{})
		switch {
		case err == nil:
			return named, nil
		case apierrors.IsNotFound(err):
			return "", &StorageError{Class: named}
		case apierrors.IsForbidden(err):
			return named, ErrStorageUnknown
		}
		return "", fmt.Errorf("look up the StorageClass %s: %w", named, err)
	}
	probe := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "shiro-storage-probe-", Namespace: c.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(DefaultClaimSize, resource.BinarySI)},
			},
		},
	}
	got, err := c.cs.CoreV1().PersistentVolumeClaims(c.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return "", fmt.Errorf("ask the cluster for its default StorageClass (a dry-run claim): %w", err)
	}
	if got.Spec.StorageClassName == nil || *got.Spec.StorageClassName == "" {
		return "", &StorageError{}
	}
	return *got.Spec.StorageClassName, nil
}

// checkStorage stops a claim that could never be bound before it is
// made. Not being allowed to read classes does not stop it.
func (c *Cluster) checkStorage(ctx context.Context, named string) error {
	if _, err := c.StorageClass(ctx, named); err != nil && !errors.Is(err, ErrStorageUnknown) {
		return err
	}
	return nil
}

// claimPending says why the workspace's claim is not bound yet, from its
// events (the provisioner's and the volume controller's words), or ""
// when it is bound or cannot be read. It runs after the pod's start ran
// out of time, so it has a few seconds of its own.
func (c *Cluster) claimPending(ctx context.Context, claim string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	pvc, err := c.cs.CoreV1().PersistentVolumeClaims(c.ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimPending {
		return ""
	}
	class := "the cluster's default class"
	if pvc.Spec.StorageClassName != nil {
		class = "StorageClass " + *pvc.Spec.StorageClassName
	}
	why := fmt.Sprintf("the workspace's claim %s (%s) is still Pending", claim, class)
	sel := fields.Set{"involvedObject.kind": "PersistentVolumeClaim", "involvedObject.name": claim}.AsSelector().String()
	evs, err := c.cs.CoreV1().Events(c.ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(evs.Items) == 0 {
		return why + "; name another class with " + storageClassHow
	}
	items := evs.Items
	slices.SortFunc(items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	if len(items) > 3 {
		items = items[len(items)-3:]
	}
	var said []string
	for _, e := range items {
		said = append(said, e.Reason+": "+strings.TrimSpace(e.Message))
	}
	return why + ": " + strings.Join(said, "; ")
}

// eventTime is when an event last happened, by whichever field its
// reporter filled.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
