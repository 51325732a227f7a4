package helper

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// TestForwardCarriesConnectionsToTheHost joins Forward (the container's
// side) and AcceptTunnel (the host's) with pipes, as the exec's stdin and
// stdout do: a connection to the forwarder's port is a stream on the host,
// bytes pass both ways, and closing the host's end stops everything.
func TestForwardCarriesConnectionsToTheHost(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	hostToCtr, hostW := io.Pipe() // the exec's stdin
	ctrToHost, ctrW := io.Pipe()  // its stdout
	done := make(chan error, 1)
	go func() {
		done <- Forward(context.Background(), hostToCtr, ctrW, "")
		ctrW.Close()
	}()
	tun, err := AcceptTunnel(ctrToHost, hostW, func() error { return hostW.Close() })
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { // an echo server in upper case, on the host's end
		defer close(served)
		for {
			c, err := tun.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "echo: "+line)
			}()
		}
	}()
	for i := range 3 {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(tun.Port))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "hello "+strconv.Itoa(i)+"\n")
		got, _ := io.ReadAll(c)
		c.Close()
		if want := "echo: hello " + strconv.Itoa(i) + "\n"; string(got) != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	tun.Close()
	<-served
	if err := <-done; err != nil {
		t.Errorf("Forward: %v", err)
	}
}
