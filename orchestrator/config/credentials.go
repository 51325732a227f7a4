package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/shiroagent/shiro/sandbox/egress"
)

// Credential is one entry of network.credentials (user file only): a
// header the egress proxy adds to every request to Host over TLS (plain
// HTTP too when Host names "http://" or a port; see
// egress.ParseCredentialHost), whose value comes
// from the host's environment variable Env or from the standard output of
// Command (an argument list run without a shell; write ["sh", "-c", "…"]
// for one). The value never enters the sandbox.
type Credential struct {
	Host    string   `json:"host"`
	Header  string   `json:"header"`
	Env     string   `json:"env,omitempty"`
	Command []string `json:"command,omitempty"`
	// Source names the entry ("network.credentials[0] in ~/.config/…").
	Source string `json:"-"`
}

// parseCredentials reads and checks the value of network.credentials.
func parseCredentials(raw []byte) ([]Credential, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var cs []Credential
	if err := dec.Decode(&cs); err != nil {
		return nil, fmt.Errorf(`"network.credentials" must be a list of {"host", "header", and "env" or "command"}: %w`, err)
	}
	for i, c := range cs {
		at := fmt.Sprintf(`"network.credentials"[%d]`, i)
		p, err := egress.ParseCredentialHost(c.Host)
		switch {
		case errors.Is(err, egress.ErrEveryHost):
			return nil, fmt.Errorf(`%s: "host" must name hosts, not every host`, at)
		case err != nil:
			return nil, fmt.Errorf("%s: %w", at, err)
		case c.Header == "" || strings.ContainsAny(c.Header, " \t\r\n:") || http.CanonicalHeaderKey(c.Header) == "Proxy-Authorization":
			return nil, fmt.Errorf(`%s: "header" must be a header name (got %q)`, at, c.Header)
		case (c.Env == "") == (len(c.Command) == 0):
			return nil, fmt.Errorf(`%s: give either "env" (a variable of yours) or "command" (a program and its arguments)`, at)
		}
		cs[i].Host = p
	}
	return cs, nil
}
