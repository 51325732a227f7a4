package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeStorage is a clientset whose claim creation does what the API
// server's DefaultStorageClass admission does: a claim naming no class
// gets the default one, if there is one. Reading classes is forbidden
// when forbidClasses is set (a namespace-only user).
func fakeStorage(t *testing.T, forbidClasses bool, classes ...*storagev1.StorageClass) (*Cluster, *fake.Clientset) {
	t.Helper()
	var objs []runtime.Object
	for _, c := range classes {
		objs = append(objs, c)
	}
	cs := fake.NewClientset(objs...)
	cs.PrependReactor("create", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pvc := a.(k8stesting.CreateAction).GetObject().(*corev1.PersistentVolumeClaim).DeepCopy()
		if pvc.Spec.StorageClassName == nil {
			for _, c := range classes {
				if c.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
					name := c.Name
					pvc.Spec.StorageClassName = &name
				}
			}
		}
		if opts := a.(k8stesting.CreateActionImpl).CreateOptions; len(opts.DryRun) > 0 {
			return true, pvc, nil // admitted, not stored
		}
		return false, nil, nil
	})
	if forbidClasses {
		cs.PrependReactor("get", "storageclasses", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, "", errors.New("cluster-wide"))
		})
	}
	return &Cluster{cs: cs, ns: "ns"}, cs
}

func class(name string, isDefault bool) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.test/p"}
	if isDefault {
		c.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return c
}

func TestStorageClass(t *testing.T) {
	ctx := t.Context()
	c, cs := fakeStorage(t, false, class("slow", false), class("fast", true))
	if got, err := c.StorageClass(ctx, ""); err != nil || got != "fast" {
		t.Errorf("the default: %q %v", got, err)
	}
	if got, err := c.StorageClass(ctx, "slow"); err != nil || got != "slow" {
		t.Errorf("named: %q %v", got, err)
	}
	var se *StorageError
	if _, err := c.StorageClass(ctx, "gone"); !errors.As(err, &se) || se.Class != "gone" ||
		!strings.Contains(err.Error(), `the StorageClass "gone" does not exist in the cluster`) {
		t.Errorf("a missing named class: %v", err)
	}
	// The probe is a dry run: nothing is stored.
	if l, _ := cs.CoreV1().PersistentVolumeClaims("ns").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("the probe made a claim: %v", l.Items)
	}

	c, _ = fakeStorage(t, false, class("slow", false))
	_, err := c.StorageClass(ctx, "")
	if !errors.As(err, &se) || se.Class != "" {
		t.Fatalf("no default: %v", err)
	}
	for _, want := range []string{"the cluster has no default StorageClass", "--storage-class or sandbox.kubernetes.storageClass"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the message lacks %q: %v", want, err)
		}
	}

	// A user who may not read classes is not stopped by the check.
	c, _ = fakeStorage(t, true, class("fast", true))
	if got, err := c.StorageClass(ctx, "fast"); !errors.Is(err, ErrStorageUnknown) || got != "fast" {
		t.Errorf("forbidden: %q %v", got, err)
	}
	if err := c.checkStorage(ctx, "fast"); err != nil {
		t.Errorf("checkStorage stopped a user who may not read classes: %v", err)
	}
}

// TestEnsureClaimStopsWithoutADefaultClass: with no class named and none
// the default, no claim is made and the error says what to do.
func TestEnsureClaimStopsWithoutADefaultClass(t *testing.T) {
	c, cs := fakeStorage(t, false, class("slow", false))
	p := plan{claim: "shiro-claim-x", spec: podSpec{Workspace: "/w"}}
	err := c.ensureClaim(t.Context(), p, Options{ClaimSize: DefaultClaimSize})
	var se *StorageError
	if !errors.As(err, &se) {
		t.Fatalf("ensureClaim: %v", err)
	}
	if l, _ := cs.CoreV1().PersistentVolumeClaims("ns").List(t.Context(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("a claim was made: %v", l.Items)
	}
	opts := Options{ClaimSize: DefaultClaimSize}
	opts.StorageClass = "slow"
	if err := c.ensureClaim(t.Context(), p, opts); err != nil {
		t.Fatalf("named class: %v", err)
	}
	got, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(t.Context(), "shiro-claim-x", metav1.GetOptions{})
	if err != nil || got.Spec.StorageClassName == nil || *got.Spec.StorageClassName != "slow" {
		t.Errorf("the claim: %+v %v", got, err)
	}
}

// TestClaimPendingSaysWhy: a claim that stays Pending is explained by its
// last events.
func TestClaimPendingSaysWhy(t *testing.T) {
	c, cs := fakeStorage(t, false)
	ctx := t.Context()
	name := "gone"
	cs.CoreV1().PersistentVolumeClaims("ns").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns"},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &name},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}, metav1.CreateOptions{})
	for i, msg := range []string{"first", "storageclass.storage.k8s.io \"gone\" not found"} {
		cs.CoreV1().Events("ns").Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "e" + string(rune('a'+i)), Namespace: "ns"},
			InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Name: "claim", Namespace: "ns"},
			Reason:         "ProvisioningFailed", Message: msg,
			LastTimestamp: metav1.NewTime(time.Unix(int64(1000+i), 0)),
		}, metav1.CreateOptions{})
	}
	got := c.claimPending(ctx, "claim")
	want := `the workspace's claim claim (StorageClass gone) is still Pending: ProvisioningFailed: first; ProvisioningFailed: storageclass.storage.k8s.io "gone" not found`
	if got != want {
		t.Errorf("claimPending:\n got %s\nwant %s", got, want)
	}
}

// TestPodEndSaysHow: a lost session names how its pod ended.
func TestPodEndSaysHow(t *testing.T) {
	c, cs := fakeStorage(t, false)
	ctx := t.Context()
	if got := c.podEnd(ctx, "gone"); got != " (it was deleted)" {
		t.Errorf("a deleted pod: %q", got)
	}
	mk := func(name string, st corev1.PodStatus) {
		t.Helper()
		if _, err := cs.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: st}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("oom", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: mainContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}},
	}}})
	mk("evicted", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."})
	mk("running", corev1.PodStatus{Phase: corev1.PodRunning})
	for name, want := range map[string]string{
		"oom":     " (its container ended: exit 137, OOMKilled)",
		"evicted": " (the pod Failed, Evicted: The node was low on resource: memory.)",
		"running": "",
	} {
		if got := c.podEnd(ctx, name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	// The channel closes before the kubelet reports the container's end:
	// podEnd asks again until the pod says why.
	mk("late", corev1.PodStatus{Phase: corev1.PodRunning})
	go func() {
		time.Sleep(600 * time.Millisecond)
		p, err := cs.CoreV1().Pods("ns").Get(context.Background(), "late", metav1.GetOptions{})
		if err != nil {
			return
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name: mainContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error"}},
		}}}
		_, _ = cs.CoreV1().Pods("ns").UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	}()
	if got, want := c.podEnd(ctx, "late"), " (its container ended: exit 143, Error)"; got != want {
		t.Errorf("a pod whose end is reported late: %q, want %q", got, want)
	}
}
