package kube

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/shiroagent/shiro/sandbox"
)

// Fast tests of what shiro asks the cluster for, without a cluster.

var testKey = []byte("0123456789abcdef0123456789abcdef")

func testSpec() podSpec {
	return podSpec{
		Workspace: "/src/My Project_2", WorkspaceID: "1:2:3", Image: "shiro-sandbox:abc", Helper: "0123456789ab", Chunks: 4,
		Memory: 4 << 30, CPUs: 2, Network: sandbox.NetworkAsk, IdleTimeout: 30 * time.Minute, UID: 1000, GID: 1000, UserName: "me",
	}
}

func TestNamesAndLabelsAreValid(t *testing.T) {
	long := testSpec()
	long.Workspace = "/src/" + strings.Repeat("Ünïcode Dir.", 20)
	for _, s := range []podSpec{testSpec(), long} {
		p := newPlan(s, testKey, "ns", "v1.2.3+dirty/x")
		for _, name := range append([]string{p.name, p.claim}, p.chunks...) {
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				t.Errorf("name %q: %v", name, errs)
			}
		}
		for k, v := range p.pod.Labels {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("label key %q: %v", k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("label %s=%q: %v", k, v, errs)
			}
		}
		if p.pod.Annotations[AnnotationWorkspace] != s.Workspace {
			t.Errorf("the workspace annotation is %q", p.pod.Annotations[AnnotationWorkspace])
		}
	}
}

func TestEveryPodSettingMakesAnotherPod(t *testing.T) {
	base := testSpec()
	changes := map[string]func(*podSpec){
		"workspace":    func(s *podSpec) { s.Workspace += "2" },
		"directory":    func(s *podSpec) { s.WorkspaceID = "1:2:4" },
		"image":        func(s *podSpec) { s.Image = "other:1" },
		"helper":       func(s *podSpec) { s.Helper = "ba9876543210" },
		"memory":       func(s *podSpec) { s.Memory *= 2 },
		"cpus":         func(s *podSpec) { s.CPUs = 1 },
		"network":      func(s *podSpec) { s.Network = sandbox.NetworkOpen },
		"idle timeout": func(s *podSpec) { s.IdleTimeout = time.Minute },
		"uid":          func(s *podSpec) { s.UID = 1001 },
		"user name":    func(s *podSpec) { s.UserName = "you" },
		"pull secret":  func(s *podSpec) { s.PullSecret = "team-registry" },
	}
	for name, change := range changes {
		s := base
		change(&s)
		if s.podName() == base.podName() {
			t.Errorf("changing the %s keeps the pod name", name)
		}
	}
	if claimName(base.Workspace, base.WorkspaceID) == claimName(base.Workspace, "1:2:4") {
		t.Error("a directory made again at the same path keeps the claim (and its HOME)")
	}
	s := base
	s.Memory, s.Image = 1<<30, "other:1"
	if claimName(s.Workspace, s.WorkspaceID) != claimName(base.Workspace, base.WorkspaceID) {
		t.Error("the claim changes with the pod's settings: a new image would lose the workspace")
	}
}

func TestThePullSecretIsThePods(t *testing.T) {
	if got := newPlan(testSpec(), testKey, "ns", "v1").pod.Spec.ImagePullSecrets; got != nil {
		t.Errorf("no secret named, the pod has %v", got)
	}
	s := testSpec()
	s.PullSecret = "team-registry"
	got := newPlan(s, testKey, "ns", "v1").pod.Spec.ImagePullSecrets
	if len(got) != 1 || got[0].Name != "team-registry" {
		t.Errorf("ImagePullSecrets %v, want team-registry", got)
	}
	// Pods made before the setting existed keep their names (the hash
	// of testSpec before it).
	if h := testSpec().hash(); h != "1aa0ebca2ba2" {
		t.Errorf("the hash of a spec without a secret changed to %s", h)
	}
}

func TestThePodRunsAsTheUserWithNothingMore(t *testing.T) {
	p := newPlan(testSpec(), testKey, "ns", "v1")
	s := p.pod.Spec
	if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken || s.RestartPolicy != corev1.RestartPolicyNever ||
		s.EnableServiceLinks == nil || *s.EnableServiceLinks {
		t.Errorf("token %v, restart %s, service links %v", s.AutomountServiceAccountToken, s.RestartPolicy, s.EnableServiceLinks)
	}
	if sc := s.SecurityContext; *sc.RunAsUser != 1000 || *sc.RunAsGroup != 1000 || *sc.FSGroup != 1000 || !*sc.RunAsNonRoot ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", sc)
	}
	for _, c := range append(s.InitContainers, s.Containers...) {
		sc := c.SecurityContext
		if *sc.RunAsUser != 1000 || *sc.AllowPrivilegeEscalation || *sc.Privileged || len(sc.Capabilities.Add) > 0 ||
			len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: security context %+v", c.Name, sc)
		}
		if c.Resources.Limits.Memory().IsZero() || c.Resources.Limits.Cpu().IsZero() {
			t.Errorf("%s: no limits", c.Name)
		}
	}
	main := s.Containers[0]
	if main.Command[0] != helperPath || strings.Join(main.Command[1:], " ") != "helper init --idle 1800s" {
		t.Errorf("PID 1 is %q", main.Command)
	}
	lim := main.Resources.Limits
	if lim.Memory().Value() != 4<<30 || lim.Cpu().MilliValue() != 2000 {
		t.Errorf("limits %v %v", lim.Memory(), lim.Cpu())
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range main.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if m := mounts[binDir]; !m.ReadOnly || m.Name != volBin {
		t.Errorf("the helper's directory is mounted %+v, want read-only", m)
	}
	if m := mounts["/src/My Project_2"]; m.Name != volClaim || m.SubPath != claimWorkspace || m.ReadOnly {
		t.Errorf("the workspace is mounted %+v, want the claim's workspace at the host's path", m)
	}
	if m := mounts[homeDir]; m.Name != volClaim || m.SubPath != claimHome {
		t.Errorf("HOME is mounted %+v, want the claim's home", m)
	}
	for _, v := range s.Volumes {
		switch v.Name {
		case volTmp:
			if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit.Value() != 1<<30 {
				t.Errorf("/tmp is %+v, want memory-backed and a quarter of the memory limit", v.EmptyDir)
			}
		case volClaim:
			if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != p.claim {
				t.Errorf("the claim volume is %+v", v.VolumeSource)
			}
		}
	}
	if p.pod.Labels[LabelNetwork] != closedNetwork {
		t.Error("an ask-mode pod is not labelled for the closing network policy")
	}
	open := testSpec()
	open.Network = sandbox.NetworkOpen
	if newPlan(open, testKey, "ns", "v1").pod.Labels[LabelNetwork] != "" {
		t.Error("an open pod is labelled closed")
	}
	root := testSpec()
	root.UID, root.GID = 0, 0
	if rp := newPlan(root, testKey, "ns", "v1").pod; rp.Spec.SecurityContext.RunAsNonRoot != nil {
		t.Error("a root pod claims runAsNonRoot")
	}
}

func TestMismatchAcceptsOnlyWhatShiroMakes(t *testing.T) {
	c := &Cluster{key: testKey, ns: "ns"}
	p := newPlan(testSpec(), testKey, "ns", "v1")
	if why := c.mismatch(p.pod.DeepCopy(), p); why != "" {
		t.Fatalf("the planned pod itself: %s", why)
	}
	changes := map[string]func(*corev1.Pod){
		"another owner": func(q *corev1.Pod) { q.Labels[LabelOwner] = strings.Repeat("0", 32) },
		"another name":  func(q *corev1.Pod) { q.Name += "-x" },
		"privileged":    func(q *corev1.Pod) { q.Spec.Containers[0].SecurityContext.Privileged = ptr(true) },
		"a capability added": func(q *corev1.Pod) {
			q.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		},
		"a host path": func(q *corev1.Pod) {
			q.Spec.Volumes = append(q.Spec.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		},
		"the host's network":  func(q *corev1.Pod) { q.Spec.HostNetwork = true },
		"a token":             func(q *corev1.Pod) { q.Spec.AutomountServiceAccountToken = ptr(true) },
		"a writable helper":   func(q *corev1.Pod) { q.Spec.Containers[0].VolumeMounts[0].ReadOnly = false },
		"another image":       func(q *corev1.Pod) { q.Spec.Containers[0].Image = "evil:1" },
		"another init":        func(q *corev1.Pod) { q.Spec.InitContainers[0].Command = []string{"sh", "-c", "true"} },
		"a sidecar":           func(q *corev1.Pod) { q.Spec.Containers = append(q.Spec.Containers, q.Spec.Containers[0]) },
		"another user":        func(q *corev1.Pod) { q.Spec.SecurityContext.RunAsUser = ptr(int64(0)) },
		"environment from":    func(q *corev1.Pod) { q.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{}} },
		"higher limits":       func(q *corev1.Pod) { q.Spec.Containers[0].Resources.Limits = nil },
		"another claim":       func(q *corev1.Pod) { q.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "other" },
		"a shared process ns": func(q *corev1.Pod) { q.Spec.ShareProcessNamespace = ptr(true) },
	}
	for name, change := range changes {
		q := p.pod.DeepCopy()
		change(q)
		if c.mismatch(q, p) == "" {
			t.Errorf("a pod with %s passes the check", name)
		}
	}
}

func TestChunksJoinIntoTheHelper(t *testing.T) {
	data := make([]byte, 3*chunkSize+12345)
	for i := range data {
		data[i] = byte(i * 7)
	}
	h := helperBinary{data: data, hash: "0123456789ab"}
	var joined []byte
	for i, c := range h.chunks() {
		if len(c) > chunkSize || len(c) == 0 {
			t.Errorf("chunk %d holds %d bytes", i, len(c))
		}
		cm := chunkConfigMap(testKey, "ns", h, i, c)
		if n := len(cm.BinaryData[chunkKey]) + len(chunkKey); n >= 1<<20 {
			t.Errorf("config map %s holds %d bytes, over the 1 MiB a config map may", cm.Name, n)
		}
		joined = append(joined, c...)
	}
	if string(joined) != string(data) || len(h.chunks()) != 4 {
		t.Errorf("%d chunks that join into %d bytes, want 4 and %d", len(h.chunks()), len(joined), len(data))
	}
}

func TestImagesThatNeedABuildAreRefused(t *testing.T) {
	for _, spec := range []string{"./Dockerfile", "devcontainer", ".devcontainer/devcontainer.json", "/abs/dir", "tools/ci.Dockerfile"} {
		if err := CheckImage(spec); err == nil || !strings.Contains(err.Error(), "registry") {
			t.Errorf("CheckImage(%q) = %v, want the registry explanation", spec, err)
		}
	}
	for _, ref := range []string{"shiro-sandbox:abc", "golang:1.22", "ghcr.io/acme/dev:3"} {
		if err := CheckImage(ref); err != nil {
			t.Errorf("CheckImage(%q) = %v", ref, err)
		}
	}
}

func TestSessionEnvKeepsAUserPATHForLoginShells(t *testing.T) {
	got := strings.Join(sessionEnv([]string{"A=1", "PATH=/opt/bin:/usr/bin"}), " ")
	if got != "A=1 PATH=/opt/bin:/usr/bin SHIRO_PATH=/opt/bin:/usr/bin" {
		t.Errorf("session env %q", got)
	}
}

// TestSetupScript runs the setup container's program on this machine,
// with its paths moved under a directory of the test's: the helper is
// joined and executable, the claim's directories made, and the user added
// to passwd and group once, under a name no other entry has.
func TestSetupScript(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	root := t.TempDir()
	for _, d := range []string{chunksDir, binDir, etcDir, claimDir, "/etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, part := range []string{"#!/bin/sh\n", "echo helper\n"} {
		if err := os.WriteFile(filepath.Join(root, chunksDir, string(rune('0'+i))), []byte(part), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	// An image whose passwd names "me" with another uid and lacks a final newline.
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nme:x:5:5::/:/bin/sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := testSpec()
	script := setupScript(s, 2)
	script = strings.ReplaceAll(script, helperDir+"/", root+helperDir+"/")
	script = strings.ReplaceAll(script, " /etc/$f", " "+root+"/etc/$f")
	script = strings.ReplaceAll(script, "</etc/$f", "<"+root+"/etc/$f")
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("setup: %v\n%s", err, out)
	}
	if got, err := exec.Command(filepath.Join(root, helperPath)).Output(); err != nil || string(got) != "helper\n" {
		t.Errorf("the joined helper ran: %q, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(root, helperPath)); err != nil || fi.Mode().Perm() != 0o111 {
		t.Errorf("the helper's mode: %v %v", fi.Mode(), err)
	}
	for _, d := range []string{claimWorkspace, claimHome, claimState} {
		if fi, err := os.Stat(filepath.Join(root, claimDir, d)); err != nil || !fi.IsDir() {
			t.Errorf("claim directory %s: %v", d, err)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, etcDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := read("passwd"), "root:x:0:0:root:/root:/bin/sh\nme:x:5:5::/:/bin/sh\nshiro:x:1000:1000:shiro sandbox user:/home/shiro:/bin/sh\n"; got != want {
		t.Errorf("passwd\n%s\nwant\n%s", got, want)
	}
	if got, want := read("group"), "root:x:0:\nme:x:1000:\n"; got != want {
		t.Errorf("group\n%s\nwant\n%s", got, want)
	}
	if got := read("profile.sh"); !strings.Contains(got, "PATH=${SHIRO_PATH:-'") {
		t.Errorf("profile script %q", got)
	}
}
