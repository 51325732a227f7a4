package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/shiroagent/shiro/sandbox/owner"
)

// ErrClusterUnreachable wraps every failure to reach the cluster.
var ErrClusterUnreachable = errors.New("kubernetes cluster unreachable")

// Cluster is a connection to one namespace of a Kubernetes cluster.
type Cluster struct {
	cs      kubernetes.Interface
	cfg     *rest.Config
	ns      string
	context string // the kubeconfig context in use
	server  string
	key     []byte // the owner key
}

// ConnectOptions choose the cluster and namespace.
type ConnectOptions struct {
	// Kubeconfig names the kubeconfig files, as KUBECONFIG does (a list);
	// empty resolves them as kubectl does ($KUBECONFIG, else
	// ~/.kube/config).
	Kubeconfig string
	// Context is the kubeconfig context (--kube-context); empty means the
	// current one.
	Context string
	// Namespace (--namespace); empty means the context's, else "default".
	Namespace string
	// StateDir holds the owner key (default owner.DefaultStateDir).
	StateDir string
}

// quietOnce silences client-go's own logging (klog, to stderr by default):
// shiro's terminal is its user's, and what goes wrong comes back as errors.
var quietOnce sync.Once

// Connect resolves the kubeconfig as kubectl does and checks the API
// server answers.
func Connect(ctx context.Context, o ConnectOptions) (*Cluster, error) {
	quietOnce.Do(func() {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	})
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = ""
		rules.Precedence = filepath.SplitList(o.Kubeconfig)
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	if o.Namespace != "" {
		overrides.Context.Namespace = o.Namespace
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: read the kubeconfig: %w", ErrClusterUnreachable, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("%w: the kubeconfig's namespace: %w", ErrClusterUnreachable, err)
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: read the kubeconfig: %w", ErrClusterUnreachable, err)
	}
	name := o.Context
	if name == "" {
		name = raw.CurrentContext
	}
	cfg.UserAgent = "shiro"
	// The command channel is one long exec; a tool call's burst of API
	// requests must not queue behind client-side rate limits.
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClusterUnreachable, err)
	}
	dir := o.StateDir
	if dir == "" {
		if dir, err = owner.DefaultStateDir(); err != nil {
			return nil, err
		}
	}
	key, err := owner.LoadKey(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cs: cs, cfg: cfg, ns: ns, context: name, server: cfg.Host, key: key}
	if _, err := c.Version(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Version asks the API server for its version.
func (c *Cluster) Version(ctx context.Context) (string, error) {
	body, err := c.cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", fmt.Errorf("%w at %s: %w", ErrClusterUnreachable, c.server, err)
	}
	var v version.Info
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("%w at %s: read its version: %w", ErrClusterUnreachable, c.server, err)
	}
	return v.GitVersion, nil
}

// Namespace is the namespace sandboxes live in.
func (c *Cluster) Namespace() string { return c.ns }

// Context is the kubeconfig context in use.
func (c *Cluster) Context() string { return c.context }

// Server is the API server's address.
func (c *Cluster) Server() string { return c.server }
