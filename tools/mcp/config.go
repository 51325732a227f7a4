package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Transports a server is reached by.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
	TransportSSE   = "sse"
)

// Config is one server's entry of the mcpServers key: a stdio server
// (Command set) or a remote one (URL set).
type Config struct {
	// Command, Args, Env and Cwd start a stdio server. Env entries are
	// merged over the environment the server inherits; Cwd defaults to
	// the workspace.
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
	// URL, Type and Headers reach a remote server. Type is "http"
	// (streamable HTTP, the default) or "sse"; Headers are sent with every
	// request.
	URL     string
	Type    string
	Headers map[string]string
}

// Transport is how the server is reached: TransportStdio, TransportHTTP or
// TransportSSE.
func (c Config) Transport() string {
	if c.Command != "" {
		return TransportStdio
	}
	if c.Type == TransportSSE {
		return TransportSSE
	}
	return TransportHTTP
}

// The keys each kind of server may have. "type" is allowed on stdio
// servers as "stdio", the spelling other clients write.
var (
	stdioKeys  = []string{"command", "args", "env", "cwd", "type"}
	remoteKeys = []string{"url", "type", "headers"}
)

// ValidName reports a server name that cannot be used: names are made of
// letters, digits, '-' and '_', and hold no "__" (which separates the
// server from the tool in mcp__<server>__<tool>).
func ValidName(name string) error {
	if name == "" {
		return errors.New("the server name is empty")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("server name %q: use letters, digits, '-' and '_' only", name)
		}
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("server name %q: \"__\" is reserved (it separates server and tool in mcp__<server>__<tool>)", name)
	}
	return nil
}

// ParseConfig reads one server's JSON object. Keys that belong to neither
// kind (disabled, timeout, ... from other clients' files) are ignored; a
// key of the wrong type, a server with both or neither of command and url,
// an unknown type or a URL that is not http(s) is an error.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Config{}, errors.New("the server's entry must be a JSON object")
	}
	var c Config
	var errs []error
	str := func(key string, dst *string) {
		if v, ok := fields[key]; ok && !isNull(v) {
			if err := json.Unmarshal(v, dst); err != nil {
				errs = append(errs, fmt.Errorf("%q must be a string", key))
			}
		}
	}
	strMap := func(key string, dst *map[string]string) {
		if v, ok := fields[key]; ok && !isNull(v) {
			if err := json.Unmarshal(v, dst); err != nil {
				errs = append(errs, fmt.Errorf("%q must be an object of strings", key))
			}
		}
	}
	str("command", &c.Command)
	str("cwd", &c.Cwd)
	str("url", &c.URL)
	str("type", &c.Type)
	strMap("env", &c.Env)
	strMap("headers", &c.Headers)
	if v, ok := fields["args"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &c.Args); err != nil {
			errs = append(errs, errors.New(`"args" must be an array of strings`))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}

	switch {
	case c.Command != "" && c.URL != "":
		return Config{}, errors.New(`give "command" (a local server) or "url" (a remote one), not both`)
	case c.Command == "" && c.URL == "":
		return Config{}, errors.New(`give "command" (a local server) or "url" (a remote one)`)
	case c.Command != "":
		if c.Type != "" && c.Type != TransportStdio {
			return Config{}, fmt.Errorf("type %q does not go with \"command\" (use \"url\" for a remote server)", c.Type)
		}
		c.Type = ""
		if err := onlyKeys(fields, stdioKeys, "a local server"); err != nil {
			return Config{}, err
		}
	default:
		switch c.Type {
		case "", TransportHTTP, "streamable-http", "streamableHttp":
			c.Type = TransportHTTP
		case TransportSSE:
		default:
			return Config{}, fmt.Errorf("type %q: want \"http\" (the default) or \"sse\"", c.Type)
		}
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Config{}, fmt.Errorf("url %q: want an http:// or https:// URL", c.URL)
		}
		if err := onlyKeys(fields, remoteKeys, "a remote server"); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// onlyKeys refuses the keys of the other kind of server (a "headers" on a
// stdio server is a mistake worth saying); other unknown keys pass.
func onlyKeys(fields map[string]json.RawMessage, allowed []string, kind string) error {
	for _, k := range slices.Concat(stdioKeys, remoteKeys) {
		if _, ok := fields[k]; ok && !slices.Contains(allowed, k) {
			return fmt.Errorf("%q does not apply to %s", k, kind)
		}
	}
	return nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }
