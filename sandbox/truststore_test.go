package sandbox

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA makes a CA and a server certificate it signs for name.
func testCA(t *testing.T, name string) (caPEM []byte, server tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestJavaTrustStoreReadsInKeytool(t *testing.T) {
	t.Parallel()
	keytool, err := exec.LookPath("keytool")
	if err != nil {
		t.Fatalf("keytool (a JDK) is needed: %v", err)
	}
	a, _ := testCA(t, "a.test")
	b, _ := testCA(t, "b.test")
	store, err := JavaTrustStore(append(append(a, "# a comment\n"...), b...), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "store.jks")
	if err := os.WriteFile(p, store, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), keytool, "-list", "-keystore", p, "-storetype", "JKS", "-storepass", JavaTrustStorePassword).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2 entries") || strings.Count(string(out), "trustedCertEntry") != 2 {
		t.Errorf("keytool -list: %v\n%s", err, out)
	}
	if _, err := JavaTrustStore([]byte("no certificate"), time.Now()); err == nil {
		t.Error("a bundle without a certificate made a store")
	}
}

// A JVM given the environment shiro gives a command (the proxy's and the
// trust store's JAVA_TOOL_OPTIONS, joined) fetches an HTTPS URL through
// the proxy and trusts the CA the store holds, with no other setting.
func TestJavaReachesHTTPSThroughTheProxyWithTheTrustStore(t *testing.T) {
	t.Parallel()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java (a JDK) is needed: %v", err)
	}
	const name = "site.shiro-test.invalid"
	caPEM, cert := testCA(t, name)
	site, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello from the site") }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go srv.ServeTLS(site, "", "")
	defer srv.Close()

	// The proxy: CONNECT to any host goes to the site.
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var connects []string
	var wg sync.WaitGroup
	defer wg.Wait()
	defer pl.Close()
	wg.Go(func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil || req.Method != http.MethodConnect {
					return
				}
				mu.Lock()
				connects = append(connects, req.Host)
				mu.Unlock()
				up, err := net.Dial("tcp", site.Addr().String())
				if err != nil {
					return
				}
				defer up.Close()
				io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
				done := make(chan struct{})
				go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite(); close(done) }()
				io.Copy(c, up)
				c.(*net.TCPConn).CloseWrite()
				<-done
			})
		}
	})

	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle.pem")
	store, err := JavaTrustStore(caPEM, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bundle, caPEM, 0o644)
	os.WriteFile(filepath.Join(dir, "store.jks"), store, 0o644)
	src := filepath.Join(dir, "Fetch.java")
	os.WriteFile(src, []byte(`public class Fetch {
  public static void main(String[] a) throws Exception {
    var c = (java.net.HttpURLConnection) new java.net.URL(a[0]).openConnection();
    System.out.println(new String(c.getInputStream().readAllBytes()));
  }
}
`), 0o644)
	port := pl.Addr().(*net.TCPAddr).Port
	env := JoinEnv(append(ProxyEnv(port, "tok", ""), TrustEnv(bundle, filepath.Join(dir, "store.jks"), "")...))
	url := "https://" + name + ":" + strconv.Itoa(site.Addr().(*net.TCPAddr).Port) + "/"
	cmd := exec.CommandContext(t.Context(), java, src, url)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello from the site") {
		t.Fatalf("java: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(connects) != 1 || !strings.HasPrefix(connects[0], name+":") {
		t.Errorf("the proxy saw CONNECT %v, want one to %s", connects, name)
	}
}
