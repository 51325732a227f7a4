package docker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The client's errors hide why an engine cannot be reached; Connect says
// the cause it finds at the endpoint, and its fix, not always "start
// Docker". (Permission denied on the socket needs a user that is not
// root: integration's TestDoctorNamesPermissionDeniedOnTheSocket.)
func TestUnreachableEngineNamesTheCause(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the probes' failed handshakes
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	tlsAddr := strings.TrimPrefix(tlsSrv.URL, "https://")
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	certs := otherCA(t)

	tests := []struct {
		name          string
		env           map[string]string
		why, fix      string
		notInTheError string
	}{
		{"a missing socket", map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(dir, "none.sock")},
			"no socket at " + filepath.Join(dir, "none.sock"), "start Docker", ""},
		{"a socket nobody listens on", map[string]string{"DOCKER_HOST": "unix://" + stale},
			"nothing listens on the socket " + stale, "start Docker", ""},
		{"a remote that refuses", map[string]string{"DOCKER_HOST": "tcp://" + refused},
			refused + " refused the connection", "correct DOCKER_HOST", "start Docker"},
		{"a TLS engine asked without certificates", map[string]string{"DOCKER_HOST": "tcp://" + tlsAddr},
			tlsAddr + " speaks TLS but no client certificates are set", "DOCKER_CERT_PATH", "start Docker"},
		{"a TLS engine whose certificate the CA does not sign", map[string]string{"DOCKER_HOST": "tcp://" + tlsAddr, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": certs},
			"the TLS handshake with " + tlsAddr + " failed", "DOCKER_CERT_PATH", "start Docker"},
		{"something else on the port", map[string]string{"DOCKER_HOST": "tcp://" + strings.TrimPrefix(plain.URL, "http://")},
			"does not answer as a Docker engine", "correct DOCKER_HOST", "start Docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DOCKER_CONTEXT", "")
			t.Setenv("DOCKER_CONFIG", t.TempDir())
			t.Setenv("DOCKER_TLS_VERIFY", "")
			t.Setenv("DOCKER_CERT_PATH", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := Connect(t.Context(), WithStateDir(t.TempDir()))
			var ue *UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("Connect = %v, want an UnreachableError", err)
			}
			if !strings.Contains(ue.Why, tt.why) || !strings.Contains(ue.Fix, tt.fix) {
				t.Errorf("why %q, fix %q; want %q and %q", ue.Why, ue.Fix, tt.why, tt.fix)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.why) || tt.notInTheError != "" && strings.Contains(msg, tt.notInTheError) {
				t.Errorf("error %q", msg)
			}
			if !errors.Is(err, ErrEngineUnreachable) {
				t.Errorf("%v is not ErrEngineUnreachable", err)
			}
		})
	}
}

// otherCA writes ca.pem, cert.pem and key.pem of a CA of its own into a
// directory (DOCKER_CERT_PATH): it signs nothing the test servers show.
func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for name, data := range map[string][]byte{
		"ca.pem": cert, "cert.pem": cert,
		"key.pem": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
