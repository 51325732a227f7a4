// Command provisioner serves the persistent volume claims of the test
// cluster (scripts/kube-test-cluster.sh) on its single node: each claim of
// its storage class, or of another class that names this provisioner (a
// test may make one), gets a local volume, a directory of its own under
// --dir, and a released volume's directory is removed with it. A local
// volume honours a pod's fsGroup, as the storage of real clusters does, so
// the sandbox's pods (which run as a non-root user) can write their claim.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// name is the provisioner's name in the storage class.
const name = "shiro-kube-test/local"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the admin kubeconfig")
	class := flag.String("class", "", "the storage class to serve")
	dir := flag.String("dir", "", "where the volumes' directories go")
	node := flag.String("node", "localhost", "the node's name")
	flag.Parse()
	if *class == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "provisioner: want --class and --dir")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "provisioner:", err)
		os.Exit(1)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p := &provisioner{cs: cs, class: *class, dir: *dir, node: *node}
	f := informers.NewSharedInformerFactory(cs, time.Minute)
	claims := f.Core().V1().PersistentVolumeClaims().Informer()
	volumes := f.Core().V1().PersistentVolumes().Informer()
	_, _ = claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.claim(ctx, o) },
		UpdateFunc: func(_, o any) { p.claim(ctx, o) },
	})
	_, _ = volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.volume(ctx, o) },
		UpdateFunc: func(_, o any) { p.volume(ctx, o) },
	})
	f.Start(ctx.Done())
	<-ctx.Done()
	f.Shutdown()
}

type provisioner struct {
	cs    kubernetes.Interface
	class string
	dir   string
	node  string
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s provisioner: %s\n", time.Now().Format(time.TimeOnly), fmt.Sprintf(format, args...))
}

// claim gives a pending claim of the class its volume.
func (p *provisioner) claim(ctx context.Context, o any) {
	pvc, ok := o.(*corev1.PersistentVolumeClaim)
	if !ok || pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending || pvc.DeletionTimestamp != nil ||
		pvc.Spec.StorageClassName == nil || !p.serves(ctx, *pvc.Spec.StorageClassName) {
		return
	}
	class := *pvc.Spec.StorageClassName
	pvName := "pvc-" + string(pvc.UID)
	path := filepath.Join(p.dir, pvName)
	if err := os.MkdirAll(path, 0o755); err != nil {
		logf("make %s: %v", path, err)
		return
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              class,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{p.node}}},
			}}}},
		},
	}
	_, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	switch {
	case err == nil:
		logf("%s/%s: volume %s", pvc.Namespace, pvc.Name, pvName)
	case apierrors.IsAlreadyExists(err):
	default:
		logf("%s/%s: create volume: %v", pvc.Namespace, pvc.Name, err)
	}
}

// serves says whether claims of class are this provisioner's: its own
// class, or one whose provisioner field names it.
func (p *provisioner) serves(ctx context.Context, class string) bool {
	if class == p.class {
		return true
	}
	sc, err := p.cs.StorageV1().StorageClasses().Get(ctx, class, metav1.GetOptions{})
	return err == nil && sc.Provisioner == name
}

// volume removes a released volume of ours and its directory.
func (p *provisioner) volume(ctx context.Context, o any) {
	pv, ok := o.(*corev1.PersistentVolume)
	if !ok || pv.Annotations["pv.kubernetes.io/provisioned-by"] != name || pv.Spec.Local == nil ||
		(pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed) {
		return
	}
	path := pv.Spec.Local.Path
	if filepath.Dir(path) != filepath.Clean(p.dir) {
		logf("%s: %s is not one of mine", pv.Name, path)
		return
	}
	if err := os.RemoveAll(path); err != nil {
		logf("%s: remove %s: %v", pv.Name, path, err)
		return
	}
	err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		logf("%s: delete: %v", pv.Name, err)
		return
	}
	logf("%s: removed", pv.Name)
}
