package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/kube"
)

// checkKube checks the Kubernetes backend: the cluster and namespace, the
// user's rights there, a sandbox pod and what runs in it, and what the
// network mode can promise on this cluster.
func (d *doctor) checkKube(ctx context.Context, sc orchestrator.SandboxConfig) {
	c, err := kube.Connect(ctx, kube.ConnectOptions{Context: sc.KubeContext, Namespace: sc.Namespace})
	if err != nil {
		d.fail("cluster", err.Error(), "check the kubeconfig (KUBECONFIG, --kube-context) and that the API server answers")
		for _, name := range []string{"rights", "storage", "tools", "pod"} {
			d.fail(name, "not checked: no cluster", "")
		}
		return
	}
	v, _ := c.Version(ctx)
	d.ok("cluster", "Kubernetes %s at %s (context %s), namespace %s", v, c.Server(), c.Context(), c.Namespace())
	missing, err := c.MissingRights(ctx)
	switch {
	case err != nil:
		d.fail("rights", err.Error(), "")
	case len(missing) > 0:
		var names []string
		for _, r := range missing {
			names = append(names, r.String())
		}
		d.fail("rights", fmt.Sprintf("you may not %s in %s", strings.Join(names, ", "), c.Namespace()),
			"bind the Role docs/kubernetes.md lists to your user in the namespace")
	default:
		d.ok("rights", "you may manage pods, pods/exec, claims, config maps and network policies in %s", c.Namespace())
	}
	d.checkStorage(ctx, c, sc.StorageClass)
	switch sc.Network {
	case "", sandbox.NetworkAsk, sandbox.NetworkNone:
		d.ok("network", "%s: a NetworkPolicy denies the pod's own traffic, which holds only where the cluster's network plugin enforces NetworkPolicy (not every plugin does); in ask mode connections go through shiro's proxy over the exec", orNetwork(sc.Network))
	default:
		d.ok("network", "open: the pod has the cluster's pod network")
	}
	sb, err := orchestrator.OpenKube(ctx, sc)
	if err != nil {
		d.fail("tools", "cannot open the sandbox: "+err.Error(), "")
		d.fail("pod", "not checked: no sandbox", "")
		return
	}
	defer sb.Close()
	d.checkTools(ctx, sb)
	problems, err := sb.Check(ctx)
	switch {
	case err != nil:
		d.fail("pod", err.Error(), "")
	case problems != "":
		d.fail("pod", fmt.Sprintf("the pod %s: %s", sb.Pod(), problems), "shiro sandbox rm, then start again")
	default:
		d.ok("pod", "%s runs as you, no capabilities, no-new-privileges, no service account token; the helper is read-only (claim %s)", sb.Pod(), sb.Claim())
	}
}

func orNetwork(n string) string {
	if n == "" {
		return sandbox.NetworkAsk
	}
	return n
}

// checkStorage says which StorageClass the workspace's claim gets, or why
// it would never be bound.
func (d *doctor) checkStorage(ctx context.Context, c *kube.Cluster, named string) {
	class, err := c.StorageClass(ctx, named)
	switch {
	case errors.Is(err, kube.ErrStorageUnknown):
		d.ok("storage", "the StorageClass %s is not checked: %v", class, err)
	case err != nil:
		d.fail("storage", err.Error(), "name a class the cluster has with --storage-class or sandbox.kubernetes.storageClass")
	case named == "":
		d.ok("storage", "the workspace's claim gets the cluster's default StorageClass, %s", class)
	default:
		d.ok("storage", "the workspace's claim gets the StorageClass %s", class)
	}
}
