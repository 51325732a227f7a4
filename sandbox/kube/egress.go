package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// tunnel is one session's forward exec and the egress proxy served on
// it: `helper forward` listens on the pod's loopback and carries each
// connection as a yamux stream over the exec's stdin and stdout, as the
// Docker backend does for a remote engine (decision 0013).
type tunnel struct {
	t      *helper.Tunnel
	st     *stream
	served chan struct{} // closed when Egress.Serve returns
	// trust is the environment pointing commands at the CA bundle, when
	// the proxy intercepts hosts for credentials.
	trust []string
}

// openTunnel starts the forwarder in the pod and serves opts.Egress on
// the streams it carries. ch writes the CA bundle, when there is one.
func (c *Cluster) openTunnel(ctx context.Context, pod string, opts Options, stderr io.Writer, ch *channel) (*tunnel, error) {
	st, err := c.startStream(ctx, pod, []string{helperPath, "helper", "forward"}, stderr)
	if err != nil {
		return nil, fmt.Errorf("start the network forwarder in %s: %w", pod, err)
	}
	t, err := helper.AcceptTunnel(st.stdout, st.stdin, st.closeStdin)
	if err != nil {
		st.close(0)
		return nil, fmt.Errorf("network forwarder in %s: %w", pod, err)
	}
	tu := &tunnel{t: t, st: st, served: make(chan struct{})}
	if ca, ok := opts.Egress.(interface{ CACert() []byte }); ok && ca.CACert() != nil {
		if tu.trust, err = installTrust(ctx, ch, ca.CACert()); err != nil {
			_ = t.Close()
			st.close(0)
			return nil, err
		}
	}
	go func() {
		defer close(tu.served)
		_ = opts.Egress.Serve(t)
	}()
	return tu, nil
}

// Port is the forwarder's port on the pod's loopback.
func (tu *tunnel) Port() int { return tu.t.Port }

// Trust is the environment pointing commands at the CA bundle, if any.
func (tu *tunnel) Trust() []string { return tu.trust }

// Close ends the tunnel's session (every connection on it) and the exec.
func (tu *tunnel) Close() {
	_ = tu.t.Close()
	tu.st.close(3 * time.Second)
	<-tu.served
}

// trustDir holds the CA bundle in the pod, on the claim's state directory.
// (The pod runs as the user throughout: a command could change the file,
// and would only change what its own clients trust.)
const trustDir = stateDir + "/ca"

// installTrust writes the proxy CA's certificate after the image's system
// bundle, through the channel, and returns the environment that points
// clients at it.
func installTrust(ctx context.Context, ch *channel, caPEM []byte) ([]string, error) {
	var sys []string
	for _, p := range sandbox.SystemBundles {
		sys = append(sys, shellQuote(p))
	}
	script := fmt.Sprintf(`set -e
mkdir -p %[1]s
for f in %[2]s; do if [ -s "$f" ]; then cat "$f"; break; fi; done >%[1]s/bundle.new
printf '\n' >>%[1]s/bundle.new
cat >>%[1]s/bundle.new
mv -f %[1]s/bundle.new %[1]s/bundle.pem`, trustDir, strings.Join(sys, " "))
	var stderr bytes.Buffer
	res, err := ch.client.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", script}, Stdin: bytes.NewReader(caPEM), Stderr: &stderr})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		return nil, fmt.Errorf("put the sandbox CA's certificate into the pod: %w", err)
	}
	return sandbox.TrustEnv(trustDir+"/bundle.pem", "", ""), nil
}
