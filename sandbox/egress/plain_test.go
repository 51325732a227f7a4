package egress

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
)

// TestPlainBodies carries plain responses of known length (spliced),
// unknown length (chunked), HEAD and a request body through the proxy, on
// a Unix socket as a local engine's sandbox reaches it.
func TestPlainBodies(t *testing.T) {
	leakCheck(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			w.Write(big)
		case "/chunked":
			w.Write(big[:100000])
			w.(http.Flusher).Flush()
			w.Write(big[100000:200000])
		case "/echo":
			io.Copy(w, r.Body)
		}
	}))
	defer backend.Close()
	hp, _ := hostport(t, backend.URL)
	var recs []Record
	recd := make(chan Record, 16)
	p := New(Config{Policy: Policy{Allow: []Rule{{Pattern: hp, Source: "t"}}}, OnRecord: func(r Record) { recd <- r }})
	sock := t.TempDir() + "/p.sock"
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = p.Serve(l) }()
	defer func() { l.Close(); <-served }()
	token, release := p.Register(sandbox.Caller{ID: "call_p"})
	defer release()
	tr := &http.Transport{
		Dial: func(string, string) (net.Conn, error) { return net.Dial("unix", sock) },
		Proxy: func(*http.Request) (*url.URL, error) {
			return &url.URL{Scheme: "http", Host: "proxy", User: url.UserPassword("shiro", token)}, nil
		},
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	get := func(method, path string, body io.Reader) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, backend.URL+path, body)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return b
	}
	if got := get("GET", "/big", nil); !bytes.Equal(got, big) {
		t.Errorf("/big: %d bytes, not the body", len(got))
	}
	if got := get("GET", "/chunked", nil); !bytes.Equal(got, big[:200000]) {
		t.Errorf("/chunked: %d bytes", len(got))
	}
	if got := get("HEAD", "/big", nil); len(got) != 0 {
		t.Errorf("HEAD: %d bytes", len(got))
	}
	if got := get("POST", "/echo", bytes.NewReader(big[:300000])); !bytes.Equal(got, big[:300000]) {
		t.Errorf("/echo: %d bytes", len(got))
	}
	for range 4 {
		recs = append(recs, <-recd)
	}
	var most int64
	for _, r := range recs {
		if r.Decision != DecisionAllow || r.Sent == 0 || r.Received == 0 {
			t.Errorf("record %+v", r)
		}
		most = max(most, r.Received)
	}
	if most < int64(len(big)) {
		t.Errorf("no record counts the 8 MiB received: %+v", recs)
	}
}
