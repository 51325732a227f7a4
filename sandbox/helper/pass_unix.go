//go:build unix

package helper

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sendConn sends passByte with c's descriptor over u.
func sendConn(u *net.UnixConn, c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return fmt.Errorf("hand over %T: no descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := raw.Control(func(fd uintptr) {
		_, _, werr = u.WriteMsgUnix([]byte{passByte}, unix.UnixRights(int(fd)), nil)
	}); err != nil {
		return err
	}
	return werr
}

// receiveConn takes the connection the forwarder hands over on u: the TCP
// socket its message carried (u is closed then), or u itself when the
// message carried no descriptor.
func receiveConn(u *net.UnixConn) (net.Conn, error) {
	_ = u.SetReadDeadline(time.Now().Add(passWait))
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4)) // room for one descriptor: the kernel closes any more
	n, oobn, flags, _, err := u.ReadMsgUnix(b[:], oob)
	if err != nil {
		return nil, err
	}
	files := parseRights(oob[:oobn])
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	if n != 1 || b[0] != passByte || flags&unix.MSG_CTRUNC != 0 || len(files) > 1 {
		return nil, errNotForwarder
	}
	if len(files) == 0 {
		// Nothing came with it: the bytes go over u.
		_ = u.SetReadDeadline(time.Time{})
		if _, err := u.Write([]byte{spliceByte}); err != nil {
			return nil, err
		}
		return u, nil
	}
	c, err := net.FileConn(files[0]) // a duplicate: files[0] is closed above
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotForwarder, err)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		_ = c.Close()
		return nil, fmt.Errorf("%w: a %T", errNotForwarder, c)
	}
	_ = u.Close()
	return tc, nil
}

// parseRights returns the descriptors an SCM_RIGHTS message carried.
func parseRights(oob []byte) []*os.File {
	if len(oob) == 0 {
		return nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "reaper-fd"))
		}
	}
	return files
}

// passDialed hands tc to the host over the pass socket at path: one
// message, the dial's token and a newline, carrying tc's descriptor.
func passDialed(path, token string, tc *net.TCPConn) error {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return err
	}
	u := c.(*net.UnixConn)
	defer u.Close()
	_ = u.SetWriteDeadline(time.Now().Add(passWait))
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := raw.Control(func(fd uintptr) {
		_, _, werr = u.WriteMsgUnix([]byte(token+"\n"), unix.UnixRights(int(fd)), nil)
	}); err != nil {
		return err
	}
	return werr
}

// receiveDialed reads one hand-over from the pass socket: the token line
// and the one TCP socket it carries. Anything else is an error matching
// errNotDialed (the descriptors that came are closed); the token is
// returned with it when the line was read, so that the dial it names
// fails at once.
func receiveDialed(u *net.UnixConn) (string, *net.TCPConn, error) {
	_ = u.SetReadDeadline(time.Now().Add(passWait))
	buf := make([]byte, maxTokenLine+1)
	oob := make([]byte, unix.CmsgSpace(4)) // room for one descriptor: the kernel closes any more
	n, oobn, flags, _, err := u.ReadMsgUnix(buf, oob)
	if err != nil {
		return "", nil, err
	}
	files := parseRights(oob[:oobn])
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	if n < 2 || buf[n-1] != '\n' {
		return "", nil, errNotDialed
	}
	token := string(buf[:n-1])
	if flags&unix.MSG_CTRUNC != 0 || len(files) != 1 {
		return token, nil, fmt.Errorf("%w: %d descriptors", errNotDialed, len(files))
	}
	c, err := net.FileConn(files[0])
	if err != nil {
		return token, nil, fmt.Errorf("%w: %w", errNotDialed, err)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		_ = c.Close()
		return token, nil, fmt.Errorf("%w: a %T", errNotDialed, c)
	}
	return token, tc, nil
}
