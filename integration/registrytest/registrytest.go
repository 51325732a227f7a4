// Package registrytest runs a real image registry (Debian's docker-registry)
// for tests: on loopback, with htpasswd auth and TLS when asked, and pushes
// local images to it through the Engine API.
package registrytest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
	"golang.org/x/crypto/bcrypt"

	"github.com/shiroagent/shiro/integration/testenv"
)

// CertsDir is where the engine looks for a registry's CA
// (<CertsDir>/<host:port>/ca.crt); it reads it on every pull.
const CertsDir = "/etc/docker/certs.d"

// Options says how to run a registry.
type Options struct {
	// User and Password turn on htpasswd auth with that one account.
	User, Password string
	// TLS serves HTTPS on [::1] with a certificate from a CA made for the
	// test, which the engine trusts through CertsDir until the test ends.
	// The engine treats 127.0.0.0/8 as insecure and older engines refuse
	// an IPv6 literal in a reference, so the registry is named by a host
	// name of its own that /etc/hosts maps to ::1 until the test ends.
	// Without TLS the registry serves plain HTTP on 127.0.0.1, which the
	// engine treats as an insecure registry.
	TLS bool
}

// Registry is a running docker-registry.
type Registry struct {
	// Addr is host:port as an image reference names it ("127.0.0.1:5000",
	// "registry-5000.shiro.test:5000").
	Addr string
	// CAPEM is the CA certificate of a TLS registry.
	CAPEM []byte

	listen   string
	opts     Options
	stopOnce sync.Once
	cmd      *exec.Cmd
	done     chan struct{}
}

// RequireBinary returns the docker-registry binary; without one the test
// is skipped, or fails under CI=true (make deps installs it).
func RequireBinary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("docker-registry")
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("CI=true and docker-registry is missing (make deps installs it): %v", err)
		}
		t.Skipf("docker-registry is missing (make deps installs it): %v", err)
	}
	return p
}

// Start runs a registry on a free port and stops it when the test ends.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	bin := RequireBinary(t)
	dir := t.TempDir()
	host := "127.0.0.1"
	if opts.TLS {
		host = "::1"
	}
	port := freePort(t, host)
	listen := net.JoinHostPort(host, strconv.Itoa(port))
	r := &Registry{Addr: listen, listen: listen, opts: opts, done: make(chan struct{})}
	name := host
	if opts.TLS {
		name = fmt.Sprintf("registry-%d.shiro.test", port)
		r.Addr = net.JoinHostPort(name, strconv.Itoa(port))
	}

	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
`, filepath.Join(dir, "data"), listen)
	if opts.TLS {
		ca, cert, key := makeCerts(t, dir, name)
		r.CAPEM = ca
		cfg += fmt.Sprintf("  tls:\n    certificate: %q\n    key: %q\n", cert, key)
		trustCA(t, r.Addr, ca)
		mapHost(t, name, host)
	}
	if opts.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatalf("hash the registry password: %v", err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(opts.User+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: shiro-test\n    path: %q\n", htpasswd)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	r.cmd = exec.Command(bin, "serve", cfgPath)
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start docker-registry: %v", err)
	}
	go func() {
		r.cmd.Wait()
		logf.Close()
		close(r.done)
	}()
	t.Cleanup(r.Stop)
	if err := r.waitReady(30 * time.Second); err != nil {
		out, _ := os.ReadFile(logf.Name())
		t.Fatalf("docker-registry on %s: %v\n%s", r.Addr, err, out)
	}
	return r
}

// Stop ends the registry and waits for it; a second call does nothing.
func (r *Registry) Stop() {
	r.stopOnce.Do(func() {
		r.cmd.Process.Kill()
		<-r.done
	})
}

// Ref is the reference of repo:tag on this registry.
func (r *Registry) Ref(repoTag string) string { return r.Addr + "/" + repoTag }

// waitReady polls /v2/ until the registry answers (200, or 401 under
// auth) or has exited.
func (r *Registry) waitReady(limit time.Duration) error {
	scheme := "http"
	tr := &http.Transport{}
	if r.opts.TLS {
		scheme = "https"
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(r.CAPEM)
		host, _, _ := net.SplitHostPort(r.Addr)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: host}
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for time.Now().Before(deadline) {
		res, err := hc.Get(scheme + "://" + r.listen + "/v2/")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK || res.StatusCode == http.StatusUnauthorized {
				return nil
			}
			err = fmt.Errorf("GET /v2/: %s", res.Status)
		}
		last = err
		select {
		case <-r.done:
			return errors.New("exited before it answered")
		case <-tick.C:
		}
	}
	return fmt.Errorf("not ready after %v: %v", limit, last)
}

// Push tags the local image src as repoTag on r, pushes it with the
// registry's account and removes the local tag again, so that a pull must
// go to the registry. It returns the pushed reference; the test's end
// removes any local copy of it that is left.
func Push(t testing.TB, api *client.Client, r *Registry, src, repoTag string) string {
	t.Helper()
	ref := r.Ref(repoTag)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := api.ImageTag(ctx, client.ImageTagOptions{Source: src, Target: ref}); err != nil {
		t.Fatalf("tag %s as %s: %v", src, ref, err)
	}
	t.Cleanup(func() { RemoveLocal(t, api, ref) })
	// The engine's resolver reads /etc/hosts again only a few seconds
	// after it changed: a TLS registry's name may be unknown to it at
	// first.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := api.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: encodeAuth(r.Addr, r.opts.User, r.opts.Password)})
		if err == nil {
			err = res.Wait(ctx)
			res.Close()
		}
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "no such host") || time.Now().After(deadline) {
			t.Fatalf("push %s: %v", ref, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("push %s: %v", ref, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	RemoveLocal(t, api, ref)
	return ref
}

// RemoveLocal untags ref in the engine; the image's layers stay while
// another tag (the sandbox image's) holds them. A missing tag is no error.
func RemoveLocal(t testing.TB, api *client.Client, ref string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := api.ImageInspect(ctx, ref); err != nil {
		return
	}
	if _, err := api.ImageRemove(ctx, ref, client.ImageRemoveOptions{}); err != nil {
		t.Errorf("remove local %s: %v", ref, err)
	}
}

// encodeAuth is the X-Registry-Auth value of an account; without one it is
// an empty account ("{}"), as the engine wants a header on every push.
func encodeAuth(addr, user, password string) string {
	if user == "" {
		return base64.URLEncoding.EncodeToString([]byte("{}"))
	}
	b, _ := json.Marshal(registry.AuthConfig{Username: user, Password: password, ServerAddress: addr})
	return base64.URLEncoding.EncodeToString(b)
}

func freePort(t testing.TB, host string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// makeCerts writes a CA and a server certificate for host signed by it
// into dir; it returns the CA's PEM and the paths of the server's
// certificate and key.
func makeCerts(t testing.TB, dir, host string) (caPEM []byte, certPath, keyPath string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "shiro test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPath = filepath.Join(dir, "server.crt")
	keyPath = filepath.Join(dir, "server.key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caPEM, certPath, keyPath
}

// trustCA writes the CA where the engine looks for addr's and removes it
// when the test ends. The engine must run on this machine and the test as
// root.
func trustCA(t testing.TB, addr string, ca []byte) {
	t.Helper()
	dir := filepath.Join(CertsDir, addr)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if testenv.InCI() {
			t.Fatalf("trust the test CA in %s: %v", dir, err)
		}
		t.Skipf("cannot trust the test CA in %s (needs root and a local engine): %v", dir, err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644); err != nil {
		t.Fatalf("trust the test CA: %v", err)
	}
}

// HostsFile is where mapHost adds a name for the TLS registry.
const HostsFile = "/etc/hosts"

// mapHost adds "ip name" to HostsFile and takes it out again when the test
// ends. The file is rewritten in place (it may be a bind mount) under a
// lock that other tests of this package share.
func mapHost(t testing.TB, name, ip string) {
	t.Helper()
	line := ip + " " + name
	if err := editHosts(func(lines []string) []string { return append(lines, line) }); err != nil {
		if testenv.InCI() {
			t.Fatalf("map %s in %s: %v", name, HostsFile, err)
		}
		t.Skipf("cannot map %s in %s (needs root): %v", name, HostsFile, err)
	}
	t.Cleanup(func() {
		err := editHosts(func(lines []string) []string {
			kept := lines[:0]
			for _, l := range lines {
				if l != line {
					kept = append(kept, l)
				}
			}
			return kept
		})
		if err != nil {
			t.Errorf("unmap %s in %s: %v", name, HostsFile, err)
		}
	})
}

func editHosts(edit func([]string) []string) error {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "shiro-registrytest-hosts.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	b, err := os.ReadFile(HostsFile)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	out := strings.Join(edit(lines), "\n") + "\n"
	return os.WriteFile(HostsFile, []byte(out), 0o644)
}
