package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// writeContext makes a docker context in the CLI's configuration dir.
func writeContext(t *testing.T, dir, name, host string, tls bool) {
	t.Helper()
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	meta := filepath.Join(dir, "contexts", "meta", id)
	if err := os.MkdirAll(meta, 0o700); err != nil {
		t.Fatal(err)
	}
	body := `{"Name":"` + name + `","Metadata":{},"Endpoints":{"docker":{"Host":"` + host + `","SkipTLSVerify":false}}}`
	if err := os.WriteFile(filepath.Join(meta, "meta.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if tls {
		d := filepath.Join(dir, "contexts", "tls", id, "docker")
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"ca.pem", "cert.pem", "key.pem"} {
			if err := os.WriteFile(filepath.Join(d, f), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestEndpointIsFoundAsTheDockerCLIFindsIt(t *testing.T) {
	dir := t.TempDir()
	writeContext(t, dir, "remote", "tcp://engine.example:2376", true)
	writeContext(t, dir, "other", "ssh://me@box.example", false)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"currentContext":"remote"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	tests := []struct {
		name, dockerHost, dockerContext string
		wantHost, wantContext           string
		local, tls                      bool
	}{
		{"DOCKER_HOST wins", "unix:///run/other.sock", "other", "unix:///run/other.sock", "", true, false},
		{"DOCKER_CONTEXT next", "", "other", "ssh://me@box.example", "other", false, false},
		{"then the current context, with its TLS files", "", "", "tcp://engine.example:2376", "remote", false, true},
		{"default is the local socket", "", "default", "", "", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", tt.dockerHost)
			t.Setenv("DOCKER_CONTEXT", tt.dockerContext)
			ep, err := resolveEndpoint()
			if err != nil {
				t.Fatal(err)
			}
			if ep.Host != tt.wantHost || ep.Context != tt.wantContext || ep.local() != tt.local || (ep.CA != "") != tt.tls {
				t.Errorf("endpoint = %+v (local %v)", ep, ep.local())
			}
			if _, _, err := ep.clientOptions(); err != nil {
				t.Errorf("clientOptions: %v", err)
			}
			if DefaultIsLocal() != tt.local {
				t.Errorf("DefaultIsLocal = %v", !tt.local)
			}
		})
	}
	t.Run("a context that is not there is an error", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "")
		t.Setenv("DOCKER_CONTEXT", "missing")
		if _, err := resolveEndpoint(); err == nil {
			t.Error("no error")
		}
	})
	t.Run("ssh hosts", func(t *testing.T) {
		for host, ok := range map[string]bool{"ssh://box": true, "ssh://me@box:2222": true, "ssh://": false, "ssh://box/path": false} {
			if _, _, err := sshDialer(host); (err == nil) != ok {
				t.Errorf("sshDialer(%q): %v", host, err)
			}
		}
	})
}
