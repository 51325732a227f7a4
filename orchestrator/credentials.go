package orchestrator

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// credentialTimeout bounds a credential's command.
const credentialTimeout = 30 * time.Second

// egressCredentials turns network.credentials into the proxy's: each value
// is read on the host when first needed (a variable of shiro's own
// environment, or a command's standard output, trimmed) and never given
// to the sandbox.
func egressCredentials(cs []config.Credential) []egress.Credential {
	out := make([]egress.Credential, 0, len(cs))
	for _, c := range cs {
		out = append(out, egress.Credential{Host: c.Host, Header: c.Header, Source: c.Source, Value: credentialValue(c)})
	}
	return out
}

func credentialValue(c config.Credential) func(context.Context) (string, error) {
	if c.Env != "" {
		return func(context.Context) (string, error) {
			v := strings.TrimSpace(os.Getenv(c.Env))
			if v == "" {
				return "", fmt.Errorf("$%s is not set in shiro's environment", c.Env)
			}
			return v, nil
		}
	}
	return func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, credentialTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, c.Command[0], c.Command[1:]...)
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.WaitDelay = time.Second
		// Its stderr is not kept: it could echo what it printed.
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("%s did not finish within %s", c.Command[0], credentialTimeout)
			}
			return "", fmt.Errorf("%s: %w", c.Command[0], err)
		}
		v := strings.TrimSpace(out.String())
		if v == "" || strings.ContainsAny(v, "\r\n") {
			return "", fmt.Errorf("%s printed no value on one line", c.Command[0])
		}
		return v, nil
	}
}

// workspaceCA is the certificate authority that signs the certificates of
// the hosts whose HTTPS is intercepted for a credential, one per
// workspace: its key stays in the user's data directory (mode 0600) and
// only its certificate goes into the sandbox. Without a data directory it
// lives for this process only.
func workspaceCA(dataDir, ws string) (*tls.Certificate, error) {
	if dataDir == "" {
		certPEM, keyPEM, err := egress.NewCA("shiro sandbox CA")
		if err != nil {
			return nil, err
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		return &c, err
	}
	base := strings.TrimSuffix(projectRulesFile(dataDir, ws), ".json")
	certFile, keyFile := base+"-ca.pem", base+"-ca-key.pem"
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err == nil {
		return &c, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the workspace's CA (%s): %w", certFile, err)
	}
	certPEM, keyPEM, err := egress.NewCA("shiro sandbox CA " + filepath.Base(base))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
		return nil, err
	}
	// The key first: a certificate without its key is never read.
	if err := atomicfile.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(certFile, certPEM, 0o644); err != nil {
		return nil, err
	}
	c, err = tls.X509KeyPair(certPEM, keyPEM)
	return &c, err
}
