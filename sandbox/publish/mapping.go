package publish

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// DefaultAddress is where a published port listens unless the user chose
// another address: this machine only.
const DefaultAddress = "127.0.0.1"

// Mapping is one published port: HostPort on the host carries to
// ContainerPort on the sandbox's loopback.
type Mapping struct {
	HostPort      int `json:"host_port"`
	ContainerPort int `json:"container_port"`
}

// String is the mapping as the user writes it ("8080:3000").
func (m Mapping) String() string {
	return strconv.Itoa(m.HostPort) + ":" + strconv.Itoa(m.ContainerPort)
}

// ParseMapping reads "HOST_PORT:CONTAINER_PORT" or "PORT" (the same port
// on both sides), each a TCP port from 1 to 65535.
func ParseMapping(s string) (Mapping, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Mapping{}, fmt.Errorf("empty port mapping: want HOST_PORT:CONTAINER_PORT or PORT")
	}
	hostPart, containerPart, two := strings.Cut(s, ":")
	if !two {
		containerPart = hostPart
	}
	if strings.Contains(containerPart, ":") {
		return Mapping{}, fmt.Errorf("port mapping %q: want HOST_PORT:CONTAINER_PORT (the host address is --publish-address)", s)
	}
	host, err := parsePort(hostPart)
	if err != nil {
		return Mapping{}, fmt.Errorf("port mapping %q: host port: %w", s, err)
	}
	container, err := parsePort(containerPart)
	if err != nil {
		return Mapping{}, fmt.Errorf("port mapping %q: container port: %w", s, err)
	}
	return Mapping{HostPort: host, ContainerPort: container}, nil
}

// ParseMappings reads every mapping of a list (the repeated --publish, the
// sandbox.publish key); a host port given twice is an error, since one
// host port carries to one container port.
func ParseMappings(list []string) ([]Mapping, error) {
	var out []Mapping
	seen := map[int]Mapping{}
	for _, s := range list {
		m, err := ParseMapping(s)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[m.HostPort]; dup {
			return nil, fmt.Errorf("host port %d is published twice (%s and %s)", m.HostPort, prev, m)
		}
		seen[m.HostPort] = m
		out = append(out, m)
	}
	return out, nil
}

func parsePort(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("missing")
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("%d is out of range (1-65535)", n)
	}
	return n, nil
}

// CheckAddress says whether addr is an IP address a port can listen on,
// and returns a warning for one that is not loopback: the sandbox's
// server becomes reachable from other machines.
func CheckAddress(addr string) (warning string, err error) {
	ip := net.ParseIP(addr)
	if ip == nil {
		return "", fmt.Errorf("publish address %q is not an IP address (for example 127.0.0.1 or ::1)", addr)
	}
	if ip.IsLoopback() {
		return "", nil
	}
	return fmt.Sprintf("published ports listen on %s, not on loopback: other machines that reach this address can connect to the sandbox's servers", addr), nil
}
