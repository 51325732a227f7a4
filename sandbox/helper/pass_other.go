//go:build !unix

package helper

import (
	"errors"
	"net"
	"time"
)

// sendConn sends passByte without a descriptor: the host answers that the
// bytes go over u.
func sendConn(u *net.UnixConn, _ net.Conn) error {
	_, err := u.Write([]byte{passByte})
	return err
}

// receiveConn answers a hand-over that cannot carry descriptors here: the
// bytes go over u.
func receiveConn(u *net.UnixConn) (net.Conn, error) {
	_ = u.SetReadDeadline(time.Now().Add(passWait))
	var b [1]byte
	if _, err := u.Read(b[:]); err != nil {
		return nil, err
	}
	_ = u.SetReadDeadline(time.Time{})
	if b[0] != passByte {
		return nil, errNotForwarder
	}
	if _, err := u.Write([]byte{spliceByte}); err != nil {
		return nil, err
	}
	return u, nil
}

// passDialed cannot hand a socket over here: the bytes go over the
// channel.
func passDialed(string, string, *net.TCPConn) error { return errors.ErrUnsupported }

// receiveDialed takes no hand-over here.
func receiveDialed(*net.UnixConn) (string, *net.TCPConn, error) {
	return "", nil, errors.ErrUnsupported
}
