package integration

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// kubeconfig gives the user a kubeconfig of their own for the test
// cluster's (whose files are root's), with its certificates inline, in
// ~/.kube/config; it returns the file and the context's namespace.
func (h *hostile) kubeconfig(kc string) (path, namespace string) {
	h.t.Helper()
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		h.t.Fatal(err)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	path = filepath.Join(h.home, ".kube", "config")
	h.writeOwned(path, string(data), 0o600)
	return path, cfg.Contexts[cfg.CurrentContext].Namespace
}

// TestKubeCopyModeHeadless: on the Kubernetes test cluster, a headless
// session edits files and runs commands in the pod's copy of the
// workspace; the user's edit between turns reaches the pod; --apply lands
// exactly the session's changes here. shiro runs as a normal user whose
// kubeconfig holds only the namespace rights docs/kubernetes.md lists.
func TestKubeCopyModeHeadless(t *testing.T) {
	t.Parallel()
	kc := testenv.RequireKube(t)
	h := newHostile(t)
	kubeconfig, _ := h.kubeconfig(kc)
	ws := h.workspace("ws")
	copyWorkspace(h, ws)
	head := h.git(ws, "rev-parse", "HEAD")
	flags := []string{"--backend", "kubernetes", "--memory", "512m", "--cpus", "1", "--network", "none"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := h.command(ctx, ws, []string{"KUBECONFIG=" + kubeconfig}, h.bin, append([]string{"sandbox", "rm"}, flags...)...).CombinedOutput(); err != nil {
			t.Logf("shiro sandbox rm: %v: %s", err, out)
		}
	})

	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"a.txt","content":"ALPHA\n"}`}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON("rm c.txt && mkdir -p d && echo new > d/new.txt && chmod +x run.sh && id -u", 0)}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "g1", Name: "grep", Input: `{"pattern":"ALPHA"}`}}},
		fakemodel.Reply{Text: "Changed them in the pod."},
	)
	env := append(providers[0].env(srv.URL), "KUBECONFIG="+kubeconfig)
	before := h.tree(ws)
	res := h.shiro(ws, env, append(append([]string{"-p", "--yolo"}, flags...), "change things")...)
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stderr, "is not on this machine: the sandbox works on a copy of the workspace") {
		t.Errorf("the run does not say it works on a copy:\n%s", res.stderr)
	}
	if got := h.tree(ws); !sameTree(got, before) {
		t.Errorf("the pod's session changed the workspace before any apply:\n got %v\nwant %v", got, before)
	}
	reqs := srv.Requests()
	if !providers[0].paired(t, reqs[2].JSON(), "b1", fmt.Sprint(h.uid)) {
		t.Errorf("bash did not run in the pod as the user (uid %d)", h.uid)
	}
	if !providers[0].paired(t, reqs[3].JSON(), "g1", "a.txt") {
		t.Errorf("grep did not search the pod's copy")
	}
	if !strings.Contains(res.stderr, "[changes] 4 files changed: 1 created, 1 deleted, 2 modified in the sandbox's copy") {
		t.Errorf("the run does not say what waits to be applied:\n%s", res.stderr)
	}

	// The user edits a file between turns; the pod sees it; then the
	// session's changes are applied.
	h.secondCopyRun(srv, ws, env, flags, head, map[string]string{
		"a.txt":      "-rw-r--r-- ALPHA\n",
		"b.txt":      "-rw-r--r-- beta\n",
		"run.sh":     "-rwxr-xr-x #!/bin/sh\necho run\n",
		"d/new.txt":  "-rw-r--r-- new\n",
		"src/x.go":   "-rw-r--r-- package x // the user's\n",
		".gitignore": "-rw-r--r-- build/\n",
	}, "[applied] 4 files changed: 1 created, 1 deleted, 2 modified")

	// `shiro sandbox shell` opens on the pod's copy, not in a Docker
	// container of the workspace.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := h.command(ctx, ws, []string{"KUBECONFIG=" + kubeconfig}, h.bin, append([]string{"sandbox", "shell"}, flags...)...)
	stdin, err := cmd.StdinPipe() // open until the shell exits, as a terminal would be
	if err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, `printf '[%s %s]\n' "$SHIRO_SANDBOX" "$(cat a.txt)"; exit 5`+"\n"); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
		t.Fatalf("shiro sandbox shell: %v, want exit 5\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "[kubernetes ALPHA]") {
		t.Errorf("the shell did not run in the pod's copy:\n%s", out.String())
	}
}
