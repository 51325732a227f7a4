// Package testenv gives Docker-backed tests what they need: a reachable
// engine (a skip on a laptop without one, a failure under CI=true), a static
// shiro binary to run and copy into containers, and the default image.
package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
)

// InCI reports whether the tests run under CI, where nothing may be skipped
// for a missing dependency.
func InCI() bool { return os.Getenv("CI") == "true" }

// RequireDocker skips the test when no engine answers, or fails it in CI.
func RequireDocker(t testing.TB) *client.Client {
	t.Helper()
	if os.Getenv("SHIRO_SKIP_DOCKER") == "1" && !InCI() {
		t.Skip("SHIRO_SKIP_DOCKER=1")
	}
	api, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	}
	if err != nil {
		if InCI() {
			t.Fatalf("CI=true and the Docker engine is unreachable: %v", err)
		}
		t.Skipf("no Docker engine: %v", err)
	}
	t.Cleanup(func() { api.Close() })
	return api
}

// RequireImage fails the test when the default image is missing: `make
// test` builds it first.
func RequireImage(t testing.TB, api *client.Client) string {
	t.Helper()
	if _, err := api.ImageInspect(context.Background(), images.Tag()); err != nil {
		t.Fatalf("the sandbox image %s is missing (make image builds it): %v", images.Tag(), err)
	}
	return images.Tag()
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns a static shiro binary: $SHIRO_BIN when set (make test
// builds one), else one built once per test process. The small
// shiro-helper is built beside it, where shiro looks for it.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SHIRO_BIN"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		repo := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "shiro-testbin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "shiro")
		for _, b := range [][2]string{{buildPath, "./cmd/shiro"}, {buildPath + "-helper", "./cmd/shiro-helper"}} {
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", b[0], b[1])
			cmd.Dir = repo
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{out: string(out), err: err}
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("build shiro: %v", buildErr)
	}
	return buildPath
}

// Helper returns the small shiro-helper built beside Binary's shiro (the
// binary shiro copies into containers).
func Helper(t testing.TB) string {
	t.Helper()
	p := Binary(t) + "-helper"
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("shiro-helper is not beside %s (make build puts it there): %v", Binary(t), err)
	}
	return p
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// Workspace makes an empty workspace directory and removes the containers
// shiro makes for it when the test ends.
func Workspace(t testing.TB, api *client.Client) string {
	t.Helper()
	ws := t.TempDir()
	t.Cleanup(func() { RemoveContainers(t, api, ws) })
	return ws
}

// RemoveContainers force-removes every managed container of a workspace,
// and its home volume.
func RemoveContainers(t testing.TB, api *client.Client, ws string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", "dev.shiro.workspace="+ws)
	res, err := api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Logf("list containers of %s: %v", ws, err)
		return
	}
	for _, c := range res.Items {
		if _, err := api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Logf("remove %s: %v", c.ID, err)
		}
	}
	vols, err := api.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Logf("list volumes of %s: %v", ws, err)
		return
	}
	for _, v := range vols.Items {
		if _, err := api.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil {
			t.Logf("remove volume %s: %v", v.Name, err)
		}
	}
}

// ContainerIDs lists the ids of a workspace's managed containers.
func ContainerIDs(t testing.TB, api *client.Client, ws string) []string {
	t.Helper()
	f := client.Filters{}.Add("label", "dev.shiro.workspace="+ws)
	res, err := api.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list containers of %s: %v", ws, err)
	}
	ids := make([]string, len(res.Items))
	for i, c := range res.Items {
		ids[i] = c.ID
	}
	return ids
}

// RequireRoot is for tests that create a normal user and run shiro as it:
// they need root. It skips on a developer's machine and fails under
// CI=true, where make test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Getuid() == 0 {
		return
	}
	if InCI() {
		t.Fatal("CI=true and not root: this test creates a normal user to run shiro as")
	}
	t.Skip("needs root to create a normal user and run shiro as it (make test in CI runs as root)")
}

// KubeconfigEnv names the kubeconfig of the test cluster; scripts/test.sh
// (make test) sets it once scripts/kube-test-cluster.sh brought the
// cluster up.
const KubeconfigEnv = "SHIRO_TEST_KUBECONFIG"

// RequireKube returns the test cluster's kubeconfig. Without one the test
// is skipped on a developer's machine and fails under CI=true, where make
// test always brings the cluster up.
//
// It holds the cluster shared until t ends, so that a test that changes
// the cluster for everyone (KubeAlone) waits for it.
func RequireKube(t testing.TB) string {
	t.Helper()
	p := kubeconfig(t)
	lockCluster(t, p, false)
	return p
}

// KubeAdminEnv names the admin kubeconfig of the test cluster; scripts/test.sh
// sets it beside KubeconfigEnv.
const KubeAdminEnv = "SHIRO_TEST_KUBE_ADMIN"

// KubeAlone is RequireKube for a test that changes the cluster for every
// other test (its default StorageClass, say) and puts it back when it
// ends: it waits until no other test, in any test binary, holds the
// cluster, and holds it alone until t ends. It returns the user's
// kubeconfig and the admin's.
func KubeAlone(t testing.TB) (user, admin string) {
	t.Helper()
	user = kubeconfig(t)
	admin = os.Getenv(KubeAdminEnv)
	if admin == "" {
		t.Fatalf("%s is set but %s is not: make test sets both", KubeconfigEnv, KubeAdminEnv)
	}
	lockCluster(t, user, true)
	return user, admin
}

// lockCluster takes the cluster's test lock, shared or alone, until t
// ends: an flock on a file named after the kubeconfig, so test binaries
// running at once (go test runs packages in parallel) see each other.
func lockCluster(t testing.TB, kubeconfig string, alone bool) {
	t.Helper()
	sum := sha256.Sum256([]byte(kubeconfig))
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "shiro-kube-tests-"+hex.EncodeToString(sum[:8])+".lock"), os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	how := syscall.LOCK_SH
	if alone {
		how = syscall.LOCK_EX
	}
	deadline := time.Now().Add(20 * time.Minute)
	for syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			f.Close()
			t.Fatal("the test cluster stayed held by other tests for 20 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() }) // closing the file lets go of the lock
}

// kubeconfig is the test cluster's user kubeconfig, or a skip (a failure
// under CI) when there is none.
func kubeconfig(t testing.TB) string {
	t.Helper()
	p := os.Getenv(KubeconfigEnv)
	if p == "" {
		if InCI() {
			t.Fatalf("CI=true and %s is not set: make test brings the test cluster up (scripts/kube-test-cluster.sh) and sets it", KubeconfigEnv)
		}
		t.Skipf("no test cluster: %s is not set (make test, or scripts/kube-test-cluster.sh up and %s=$(scripts/kube-test-cluster.sh kubeconfig))", KubeconfigEnv, KubeconfigEnv)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s=%s: %v", KubeconfigEnv, p, err)
	}
	return p
}

// SandboxUser is the uid:gid the Kubernetes tests run their pods as: the
// caller's, or under root (CI) that of a normal user, 1001 (shirotest's
// on the machines make test runs on), so the pod runs as non-root as it
// does for every user.
func SandboxUser() (uid, gid int) {
	if os.Getuid() != 0 {
		return os.Getuid(), os.Getgid()
	}
	return 1001, 1001
}
