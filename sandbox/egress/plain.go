package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/elazarl/goproxy"
)

// plainTrip carries a plain HTTP request (not an upgrade) on a connection
// of its own, as http.Transport would with keep-alives off, but keeps the
// connection within reach of the response's body: once the header and
// the first bytes are through, serveConn.ReadFrom splices the rest of a
// body of known length from the target's socket to the command's.
func (p *Proxy) plainTrip(req *http.Request, _ *goproxy.ProxyCtx) (*http.Response, error) {
	info, _ := req.Context().Value(dialKey{}).(dialInfo)
	host, port, err := hostPortOf(req.URL)
	if err != nil {
		return nil, err
	}
	raw, done, err := p.connect(req.Context(), info.token, net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	conn := &countingConn{Conn: raw, done: done}
	req.Close = true // "Connection: close": the server ends the connection with the response
	wrote := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(conn, 64<<10)
		err := req.Write(bw)
		if err == nil {
			err = bw.Flush()
		}
		wrote <- err
	}()
	br := bufio.NewReaderSize(conn, 64<<10)
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(br, req)
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		resp.Body.Close() // an informational answer (100 Continue): the real one follows
	}
	if err != nil {
		_ = raw.Close()
		if werr := <-wrote; werr != nil {
			err = werr
		}
		_ = conn.Close()
		return nil, err
	}
	resp.Body = &plainBody{ReadCloser: resp.Body, conn: conn, br: br, wrote: wrote, length: resp.ContentLength, bodyless: req.Method == http.MethodHead}
	return resp, nil
}

// usePlainTrip reports whether a request goes through plainTrip: plain
// HTTP, not an upgrade (those keep http.Transport, whose body is the
// upgraded connection).
func usePlainTrip(r *http.Request) bool {
	return r.URL.Scheme == "http" && r.Header.Get("Upgrade") == "" && !strings.EqualFold(r.Header.Get("Connection"), "upgrade")
}

// plainBody is a response's body read from its own connection.
type plainBody struct {
	io.ReadCloser // as net/http frames it
	conn          *countingConn
	br            *bufio.Reader
	wrote         chan error // the request's writer
	length        int64      // the body's length; -1 when unknown
	bodyless      bool
	read          int64
	once          sync.Once
}

func (b *plainBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	return n, err
}

// Close ends the connection (the rest of the body is not read) and waits
// for the request's writer.
func (b *plainBody) Close() error {
	b.once.Do(func() {
		_ = b.conn.Conn.Close() // stops the writer
		<-b.wrote
		_ = b.conn.Close() // records the connection, with what the writer sent
	})
	return nil
}

// spliceTo writes the rest of the body to w: what the reader holds, then
// the socket's bytes until the server closes the connection (it was asked
// to), which the kernel moves without copying them through the proxy when
// w is a Unix or TCP socket. ok is false when the body's length is not
// known, and nothing was written.
func (b *plainBody) spliceTo(w io.Writer) (n int64, ok bool, err error) {
	rest := b.length - b.read
	if b.length < 0 || b.bodyless || rest < 0 {
		return 0, false, nil
	}
	if k := int64(b.br.Buffered()); k > 0 {
		k = min(k, rest)
		head, _ := b.br.Peek(int(k))
		m, err := w.Write(head)
		_, _ = b.br.Discard(m)
		n += int64(m)
		if err != nil {
			return n, true, err
		}
	}
	if n < rest {
		tcp, isTCP := b.conn.Conn.(*net.TCPConn)
		var m int64
		if isTCP {
			m, err = tcp.WriteTo(w) // splices to a *net.UnixConn or *net.TCPConn
		} else {
			m, err = io.Copy(w, b.conn.Conn)
		}
		b.conn.recv.Add(m)
		n += m
	}
	b.read += n
	return n, true, err
}
