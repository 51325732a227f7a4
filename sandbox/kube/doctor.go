package kube

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shiroagent/shiro/sandbox"
)

// Right is one thing shiro does in the namespace.
type Right struct {
	Verb, Group, Resource, Subresource string
}

func (r Right) String() string {
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	if r.Group != "" {
		res += "." + r.Group
	}
	return r.Verb + " " + res
}

// Rights are what a user needs in the namespace (docs/kubernetes.md lists
// them as a Role).
var Rights = []Right{
	{Verb: "create", Resource: "pods"}, {Verb: "get", Resource: "pods"}, {Verb: "list", Resource: "pods"},
	{Verb: "watch", Resource: "pods"}, {Verb: "delete", Resource: "pods"},
	{Verb: "create", Resource: "pods", Subresource: "exec"},
	{Verb: "create", Resource: "persistentvolumeclaims"}, {Verb: "get", Resource: "persistentvolumeclaims"},
	{Verb: "list", Resource: "persistentvolumeclaims"}, {Verb: "delete", Resource: "persistentvolumeclaims"},
	{Verb: "create", Resource: "configmaps"}, {Verb: "get", Resource: "configmaps"},
	{Verb: "list", Resource: "configmaps"}, {Verb: "delete", Resource: "configmaps"},
	{Verb: "create", Group: "networking.k8s.io", Resource: "networkpolicies"},
	{Verb: "get", Group: "networking.k8s.io", Resource: "networkpolicies"},
}

// MissingRights asks the API server (SelfSubjectAccessReview) which of
// Rights the user lacks in the namespace.
func (c *Cluster) MissingRights(ctx context.Context) ([]Right, error) {
	var missing []Right
	for _, r := range Rights {
		rev, err := c.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: c.ns, Verb: r.Verb, Group: r.Group, Resource: r.Resource, Subresource: r.Subresource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("ask whether you may %s in %s: %w", r, c.ns, err)
		}
		if !rev.Status.Allowed {
			missing = append(missing, r)
		}
	}
	return missing, nil
}

// Check runs in the session's pod what the doctor reports about it: that
// it runs as the user, without capabilities or a service account token,
// and that the helper is not the user's to change. It returns "" when all
// hold, else what does not.
func (s *Sandbox) Check(ctx context.Context) (string, error) {
	// Each probe of a write runs in a subshell: a redirection that fails on
	// a special builtin (:) ends a POSIX shell, not just the command.
	script := `set -u
[ "$(id -u):$(id -g)" = "` + fmt.Sprintf("%d:%d", s.opts.UID, s.opts.GID) + `" ] || echo "runs as $(id -u):$(id -g)"
grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status || echo "has capabilities"
grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status || echo "may gain privileges"
[ -e /var/run/secrets/kubernetes.io/serviceaccount/token ] && echo "holds a service account token"
( : >>` + helperPath + ` ) 2>/dev/null && echo "the helper is writable"
( : >` + binDir + `/.probe ) 2>/dev/null && echo "the helper's directory is writable"
:`
	var out strings.Builder
	res, err := s.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", script}, Stdout: &out})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("the check exited %d", res.ExitCode)
	}
	return strings.ReplaceAll(strings.TrimSpace(out.String()), "\n", "; "), nil
}
