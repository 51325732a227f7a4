package orchestrator

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/orchestrator/config"
)

func TestCredentialValues(t *testing.T) {
	t.Setenv("SHIRO_TEST_CRED", "  Bearer from-env \n")
	ctx := context.Background()
	v, err := credentialValue(config.Credential{Env: "SHIRO_TEST_CRED"})(ctx)
	if err != nil || v != "Bearer from-env" {
		t.Errorf("env: %q, %v", v, err)
	}
	if _, err := credentialValue(config.Credential{Env: "SHIRO_TEST_UNSET_CRED"})(ctx); err == nil || !strings.Contains(err.Error(), "$SHIRO_TEST_UNSET_CRED is not set") {
		t.Errorf("unset env: %v", err)
	}
	// No shell: the argument is printed as it is, $HOME unexpanded.
	v, err = credentialValue(config.Credential{Command: []string{"echo", "tok $HOME"}})(ctx)
	if err != nil || v != "tok $HOME" {
		t.Errorf("command: %q, %v", v, err)
	}
	_, err = credentialValue(config.Credential{Command: []string{"sh", "-c", "echo secret-on-stderr >&2; exit 3"}})(ctx)
	if err == nil || strings.Contains(err.Error(), "secret-on-stderr") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("failing command: %v", err)
	}
}

func TestWorkspaceCAIsKeptWithItsKeyPrivate(t *testing.T) {
	data := t.TempDir()
	ca, err := workspaceCA(data, "/some/workspace")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := filepath.Glob(filepath.Join(data, "network", "*-ca-key.pem"))
	if len(keys) != 1 {
		t.Fatalf("keys %v", keys)
	}
	if fi, err := os.Stat(keys[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", fi.Mode(), err)
	}
	again, err := workspaceCA(data, "/some/workspace")
	if err != nil || !bytes.Equal(again.Certificate[0], ca.Certificate[0]) {
		t.Errorf("a second session made another CA (%v)", err)
	}
	other, err := workspaceCA(data, "/another/workspace")
	if err != nil || bytes.Equal(other.Certificate[0], ca.Certificate[0]) {
		t.Errorf("two workspaces share a CA (%v)", err)
	}
}
