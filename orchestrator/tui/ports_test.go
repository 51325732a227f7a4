package tui

import (
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox/publish"
)

func TestPortsText(t *testing.T) {
	t.Parallel()
	got := portsText("127.0.0.1", []publish.Port{
		{Mapping: publish.Mapping{HostPort: 8080, ContainerPort: 3000}, Address: "127.0.0.1:8080", Conns: 2},
		{Mapping: publish.Mapping{HostPort: 5173, ContainerPort: 5173}, Address: "127.0.0.1:5173"},
	})
	for _, want := range []string{
		"127.0.0.1:8080        → sandbox port 3000   2 connections",
		"127.0.0.1:5173        → sandbox port 5173   no connections",
		"/ports add HOST_PORT:CONTAINER_PORT",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("portsText lacks %q:\n%s", want, got)
		}
	}
	if got := portsText("::1", nil); !strings.HasPrefix(got, "no ports published (they would listen on ::1)") {
		t.Errorf("empty list: %q", got)
	}
	if lookupCommand("ports") == nil {
		t.Error("/ports is not registered")
	}
}
