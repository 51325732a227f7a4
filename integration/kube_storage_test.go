package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/sandbox/kube"
	"github.com/shiroagent/shiro/sandbox/owner"
)

const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// TestKubeStorageClass runs alone (it takes the test cluster's default
// StorageClass away and puts it back). With no class named and no default
// in the cluster, the first command fails at once, naming the missing
// default and the flag, and no claim is made; doctor says the same. With
// --storage-class naming a class the test makes, the command runs and the
// claim has that class. shiro runs as a normal user with only the
// namespace rights docs/kubernetes.md lists.
func TestKubeStorageClass(t *testing.T) {
	userKC, adminKC := testenv.KubeAlone(t) // not parallel: nothing else uses the cluster meanwhile
	h := newHostile(t)
	ctx := t.Context()
	adminCfg, err := clientcmd.BuildConfigFromFlags("", adminKC)
	if err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(adminCfg)

	kubeconfig, ns := h.kubeconfig(userKC)
	env := []string{"KUBECONFIG=" + kubeconfig}
	ws := h.workspace("ws")
	h.writeOwned(filepath.Join(ws, "a.txt"), "a\n", 0o644)
	flags := []string{"--backend", "kubernetes", "--memory", "512m", "--cpus", "1", "--network", "none"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := h.command(ctx, ws, env, h.bin, append([]string{"sandbox", "rm"}, flags...)...).CombinedOutput(); err != nil {
			t.Logf("shiro sandbox rm: %v: %s", err, out)
		}
	})
	claims := func() []string {
		t.Helper()
		l, err := admin.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelWorkspace + "=" + owner.WorkspaceKey(ws)})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range l.Items {
			class := "<none>"
			if c.Spec.StorageClassName != nil {
				class = *c.Spec.StorageClassName
			}
			out = append(out, c.Name+" "+class)
		}
		return out
	}

	// Take the default away, and put it back at the end.
	classes, err := admin.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range classes.Items {
		if sc.Annotations[defaultClassAnnotation] != "true" {
			continue
		}
		setDefault(t, admin, sc.Name, "false")
		name := sc.Name
		t.Cleanup(func() { setDefault(t, admin, name, "true") })
	}

	res := h.shiro(ws, env, append(flags, "tool", "bash", bashJSON("echo in-the-pod", 0))...)
	if res.code == 0 {
		t.Fatalf("the command ran with no StorageClass to bind its claim:\n%s\n%s", res.stdout, res.stderr)
	}
	mustContain(t, "stderr", res.stderr, "the cluster has no default StorageClass", "--storage-class or sandbox.kubernetes.storageClass")
	if got := claims(); len(got) != 0 {
		t.Errorf("a claim was made that could never be bound: %v", got)
	}
	res = h.shiro(ws, env, append(flags, "doctor")...)
	mustContain(t, "doctor", res.stdout, "storage", "the cluster has no default StorageClass")

	// A class of the test's own, served by the cluster's provisioner.
	var b [4]byte
	rand.Read(b[:])
	name := "shiro-test-" + hex.EncodeToString(b[:])
	del := corev1.PersistentVolumeReclaimDelete
	bind := storagev1.VolumeBindingImmediate
	if _, err := admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       "shiro-kube-test/local",
		ReclaimPolicy:     &del,
		VolumeBindingMode: &bind,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	named := append(flags, "--storage-class", name)
	res = h.shiro(ws, env, append(named, "tool", "bash", bashJSON("echo in-the-pod", 0))...)
	if res.code != 0 || !strings.Contains(res.stdout, "in-the-pod") {
		t.Fatalf("with --storage-class %s: exit %d\nstdout: %s\nstderr: %s\n%s", name, res.code, res.stdout, res.stderr, podReport(admin, ns))
	}
	if got := claims(); len(got) != 1 || !strings.HasSuffix(got[0], " "+name) {
		t.Errorf("the workspace's claims: %v, want one of class %s", got, name)
	}
	// The user may not read StorageClasses (cluster-wide): doctor says
	// the named one is not checked, and the pod line holds.
	res = h.shiro(ws, env, append(named, "doctor")...)
	mustContain(t, "doctor", res.stdout, "storage   the StorageClass "+name+" is not checked: you may not read the cluster's StorageClasses",
		"✓ pod ")
}

// setDefault sets the default-class annotation of a StorageClass.
func setDefault(t *testing.T, cs kubernetes.Interface, name, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc, err := cs.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("get StorageClass %s: %v", name, err)
		return
	}
	if sc.Annotations == nil {
		sc.Annotations = map[string]string{}
	}
	sc.Annotations[defaultClassAnnotation] = value
	if _, err := cs.StorageV1().StorageClasses().Update(ctx, sc, metav1.UpdateOptions{}); err != nil {
		t.Errorf("set StorageClass %s default=%s: %v", name, value, err)
	}
}

// podReport is what the cluster says of the namespace's pods and its
// recent events, for a failure's message: a pod that ended under a
// command is otherwise known only by the helper channel's close.
func podReport(cs kubernetes.Interface, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "list pods: %v\n", err)
	} else {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s: phase %s %s %s\n", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message)
			for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				fmt.Fprintf(&b, "  container %s: restarts %d, state %+v\n", st.Name, st.RestartCount, st.State)
			}
		}
	}
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "list events: %v\n", err)
		return b.String()
	}
	for _, e := range events.Items {
		fmt.Fprintf(&b, "event %s %s/%s: %s: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}
