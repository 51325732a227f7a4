package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/owner"
)

// Labels and annotations on what shiro makes in a namespace. Label values
// cannot hold a path: the workspace is a hash there and its path an
// annotation.
const (
	LabelManaged   = "dev.shiro.managed"
	LabelWorkspace = "dev.shiro.workspace" // owner.WorkspaceKey of the path
	LabelConfig    = "dev.shiro.config"
	LabelVersion   = "dev.shiro.version"
	LabelOwner     = owner.Label
	// LabelNetwork is "closed" on the pods of ask and none mode: the
	// namespace's NetworkPolicy selects them.
	LabelNetwork = "dev.shiro.network"
	// LabelHelper is on the helper's config maps: the binary's hash.
	LabelHelper = "dev.shiro.helper"

	AnnotationWorkspace = "dev.shiro.workspace" // the workspace's path
	AnnotationImage     = "dev.shiro.image"
	AnnotationClaim     = "dev.shiro.claim"
)

// Paths in the pod. The helper's directory is an emptyDir the setup
// container fills and the sandbox container mounts read-only.
const (
	helperDir   = "/.shiro"
	binDir      = helperDir + "/bin"
	helperPath  = binDir + "/shiro-helper"
	stateDir    = helperDir + "/state" // on the claim: the helper's last-used mark
	etcDir      = helperDir + "/etc"   // the setup's passwd, group and profile script
	chunksDir   = helperDir + "/chunks"
	claimDir    = helperDir + "/claim" // the claim's root, in the setup container only
	homeDir     = "/home/shiro"
	profileFile = "/etc/profile.d/00-shiro-path.sh"
)

// Names of the pod's containers and volumes.
const (
	mainContainer  = "sandbox"
	setupContainer = "setup"
	volClaim       = "workspace"
	volBin         = "helper"
	volEtc         = "etc"
	volTmp         = "tmp"
	volChunks      = "helper-chunks"
)

// The subdirectories of a workspace's claim.
const (
	claimWorkspace = "workspace"
	claimHome      = "home"
	claimState     = "state"
)

// closedNetwork is LabelNetwork's value on pods with no network of their
// own.
const closedNetwork = "closed"

// podSpec is everything that decides a pod. Its hash names the pod: a
// change means a new pod (the claim, keyed by the workspace directory,
// stays).
type podSpec struct {
	Workspace   string
	WorkspaceID string // owner.WorkspaceID
	Image       string
	Helper      string // the helper binary's hash
	Chunks      int
	Memory      int64
	CPUs        float64
	Network     string // ask, open or none
	IdleTimeout time.Duration
	UID, GID    int
	UserName    string
	// PullSecret names the secret the nodes pull Image with ("": none).
	PullSecret string
}

// specVersion changes when what a pod holds changes shape.
const specVersion = "k1"

func (s podSpec) hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%d\x00%d\x00%g\x00%s\x00%d\x00%d:%d\x00%s",
		specVersion, s.Workspace, s.WorkspaceID, s.Image, s.Helper, s.Chunks, s.Memory, s.CPUs,
		s.Network, s.IdleTimeout, s.UID, s.GID, s.UserName)
	if s.PullSecret != "" { // added so that the pods of those without one keep their names
		fmt.Fprintf(h, "\x00pull-secret=%s", s.PullSecret)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// closed says the pod has no network of its own (ask and none).
func (s podSpec) closed() bool { return s.Network != sandbox.NetworkOpen }

var nameUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// baseName is the readable part of the names: the workspace's base name,
// as a DNS label allows it.
func baseName(ws string) string {
	b := nameUnsafe.ReplaceAllString(strings.ToLower(filepath.Base(ws)), "-")
	if len(b) > 30 {
		b = b[:30]
	}
	b = strings.Trim(b, "-")
	if b == "" {
		b = "root"
	}
	return b
}

// podName is readable (the workspace's base name) and unique (hashes of the
// path and of the settings).
func (s podSpec) podName() string {
	return fmt.Sprintf("shiro-%s-%s-%s", baseName(s.Workspace), owner.WorkspaceKey(s.Workspace), s.hash())
}

// claimName names the workspace directory's claim (its HOME and its
// workspace): a directory made again at the same path gets another.
func claimName(ws, wsID string) string {
	return fmt.Sprintf("shiro-%s-%s", baseName(ws), owner.WorkspaceVolumeKey(ws, wsID))
}

// tmpSize is /tmp's limit: a quarter of the memory limit, so that filling
// it ends in "no space left" and never in the memory limit's kill.
func (s podSpec) tmpSize() int64 { return s.Memory / 4 }

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// labelValue makes s a valid label value (at most 63 characters of
// [A-Za-z0-9_.-], alphanumeric at both ends).
func labelValue(s string) string {
	s = labelUnsafe.ReplaceAllString(s, "-")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "-_.")
}

// plan is what shiro would make for a session: the pod and the names of
// what it needs.
type plan struct {
	spec   podSpec
	name   string
	claim  string
	chunks []string // the helper's config maps, in order
	pod    *corev1.Pod
}

// newPlan works out the pod for a spec. key is the owner key; ns the
// namespace.
func newPlan(spec podSpec, key []byte, ns, version string) plan {
	p := plan{spec: spec, name: spec.podName(), claim: claimName(spec.Workspace, spec.WorkspaceID)}
	for i := range spec.Chunks {
		p.chunks = append(p.chunks, chunkName(spec.Helper, i))
	}
	p.pod = p.build(key, ns, version)
	return p
}

func ptr[T any](v T) *T { return &v }

// build makes the pod object.
func (p plan) build(key []byte, ns, version string) *corev1.Pod {
	s := p.spec
	labels := map[string]string{
		LabelManaged:   "true",
		LabelWorkspace: owner.WorkspaceKey(s.Workspace),
		LabelConfig:    s.hash(),
		LabelVersion:   labelValue(version),
		LabelOwner:     owner.Token(key, "pod", p.name, s.Workspace, s.hash()),
	}
	if s.closed() {
		labels[LabelNetwork] = closedNetwork
	}
	uid, gid := int64(s.UID), int64(s.GID)
	var nonRoot *bool
	if s.UID != 0 {
		nonRoot = ptr(true)
	}
	restricted := &corev1.SecurityContext{
		RunAsUser:                &uid,
		RunAsGroup:               &gid,
		RunAsNonRoot:             nonRoot,
		AllowPrivilegeEscalation: ptr(false),
		Privileged:               ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	mem := resource.NewQuantity(s.Memory, resource.BinarySI)
	cpu := resource.NewMilliQuantity(int64(s.CPUs*1000), resource.DecimalSI)
	reqMem := resource.NewQuantity(min(s.Memory, 256<<20), resource.BinarySI)
	reqCPU := resource.NewMilliQuantity(min(int64(s.CPUs*1000), 250), resource.DecimalSI)
	idle := strconv.FormatInt(int64(s.IdleTimeout/time.Second), 10) + "s"

	var sources []corev1.VolumeProjection
	for i, name := range p.chunks {
		sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
			Items:                []corev1.KeyToPath{{Key: chunkKey, Path: strconv.Itoa(i), Mode: ptr(int32(0o444))}},
		}})
	}
	var pullSecrets []corev1.LocalObjectReference
	if s.PullSecret != "" {
		pullSecrets = []corev1.LocalObjectReference{{Name: s.PullSecret}}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      p.name,
			Namespace: ns,
			Labels:    labels,
			Annotations: map[string]string{
				AnnotationWorkspace: s.Workspace,
				AnnotationImage:     s.Image,
				AnnotationClaim:     p.claim,
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ImagePullSecrets:              pullSecrets,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(5)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:           &uid,
				RunAsGroup:          &gid,
				RunAsNonRoot:        nonRoot,
				FSGroup:             &gid,
				FSGroupChangePolicy: ptr(corev1.FSGroupChangeOnRootMismatch),
				SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{
				Name:                     setupContainer,
				Image:                    s.Image,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Command:                  []string{"/bin/sh", "-c", setupScript(s, len(p.chunks))},
				SecurityContext:          restricted,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("50m")},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: volChunks, MountPath: chunksDir, ReadOnly: true},
					{Name: volBin, MountPath: binDir},
					{Name: volEtc, MountPath: etcDir},
					{Name: volClaim, MountPath: claimDir},
				},
			}},
			Containers: []corev1.Container{{
				Name:            mainContainer,
				Image:           s.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{helperPath, "helper", "init", "--idle", idle},
				WorkingDir:      s.Workspace,
				Env: []corev1.EnvVar{
					{Name: "HOME", Value: homeDir},
					{Name: "LANG", Value: "C.UTF-8"},
					{Name: "TERM", Value: "dumb"},
					{Name: "SHIRO_SANDBOX", Value: "kubernetes"},
					{Name: "USER", Value: s.UserName},
					{Name: "LOGNAME", Value: s.UserName},
				},
				SecurityContext:          restricted,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceMemory: *mem, corev1.ResourceCPU: *cpu},
					Requests: corev1.ResourceList{corev1.ResourceMemory: *reqMem, corev1.ResourceCPU: *reqCPU},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: volBin, MountPath: binDir, ReadOnly: true},
					{Name: volEtc, MountPath: "/etc/passwd", SubPath: "passwd", ReadOnly: true},
					{Name: volEtc, MountPath: "/etc/group", SubPath: "group", ReadOnly: true},
					{Name: volEtc, MountPath: profileFile, SubPath: "profile.sh", ReadOnly: true},
					{Name: volClaim, MountPath: s.Workspace, SubPath: claimWorkspace},
					{Name: volClaim, MountPath: homeDir, SubPath: claimHome},
					{Name: volClaim, MountPath: stateDir, SubPath: claimState},
					{Name: volTmp, MountPath: "/tmp"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: volClaim, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.claim}}},
				{Name: volBin, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(64<<20, resource.BinarySI)}}},
				{Name: volEtc, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(16<<20, resource.BinarySI)}}},
				{Name: volTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(s.tmpSize(), resource.BinarySI)}}},
				{Name: volChunks, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources, DefaultMode: ptr(int32(0o444))}}},
			},
		},
	}
}

// setupScript is the setup container's program (sh, run as the user): it
// joins the helper's chunks into the helper directory and makes it
// executable but not readable (a process that execs a file its user cannot
// read is not dumpable: out of reach of the command user's ptrace and
// /proc/<pid>/fd; the mount is read-only, so not even its owner can make it
// readable again), makes the claim's directories, and writes the passwd and
// group files (the image's, with the user added when its ids are missing)
// and the login shells' PATH script that the sandbox container mounts.
// It needs only sh, cat, chmod and mkdir from the image.
func setupScript(s podSpec, chunks int) string {
	var files []string
	for i := range chunks {
		files = append(files, chunksDir+"/"+strconv.Itoa(i))
	}
	return fmt.Sprintf(`set -eu
cat %[1]s >%[2]s
chmod 0111 %[2]s
mkdir -p %[3]s/%[4]s %[3]s/%[5]s %[3]s/%[6]s
uid=%[7]d gid=%[8]d name=%[9]s
has_id() { while IFS=: read -r _n _x _i _r; do [ "$_i" = "$2" ] && return 0; done <"$1"; return 1; }
has_name() { while IFS=: read -r _n _r; do [ "$_n" = "$2" ] && return 0; done <"$1"; return 1; }
for f in passwd group; do
  : >%[10]s/$f
  if [ -r /etc/$f ]; then
    while IFS= read -r _l || [ -n "$_l" ]; do printf '%%s\n' "$_l"; done </etc/$f >%[10]s/$f
  fi
done
if ! has_id %[10]s/passwd "$uid"; then
  n=$name
  if has_name %[10]s/passwd "$n"; then n=shiro; fi
  if has_name %[10]s/passwd "$n"; then n=shiro$uid; fi
  printf '%%s:x:%%s:%%s:shiro sandbox user:%[11]s:/bin/sh\n' "$n" "$uid" "$gid" >>%[10]s/passwd
fi
if ! has_id %[10]s/group "$gid"; then
  n=$name
  if has_name %[10]s/group "$n"; then n=shiro$gid; fi
  printf '%%s:x:%%s:\n' "$n" "$gid" >>%[10]s/group
fi
p=$PATH
case $p in *"'"*|"") p=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ;; esac
printf '%%s\n' "# Written by shiro: a login shell keeps the PATH of the image and of --env." \
  "PATH=\${SHIRO_PATH:-'$p'}; export PATH" >%[10]s/profile.sh
`, strings.Join(files, " "), helperPath, claimDir, claimWorkspace, claimHome, claimState,
		s.UID, s.GID, shellQuote(s.UserName), etcDir, homeDir)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
