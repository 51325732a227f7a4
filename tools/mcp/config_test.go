package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		server  string
		wantErr string
	}{
		{"letters digits dash underscore", "my-srv_2", ""},
		{"empty", "", "empty"},
		{"a dot", "a.b", "letters, digits"},
		{"a space", "a b", "letters, digits"},
		{"a double underscore", "a__b", `"__" is reserved`},
		{"not ASCII", "café", "letters, digits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := ValidName(tc.server)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidName(%q) = %v", tc.server, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ValidName(%q) = %v, want an error with %q", tc.server, err, tc.wantErr)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		raw       string
		want      Config
		transport string
		wantErr   string
	}{
		{
			name:      "stdio with everything",
			raw:       `{"command":"npx","args":["-y","srv"],"env":{"A":"1"},"cwd":"tools"}`,
			want:      Config{Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"A": "1"}, Cwd: "tools"},
			transport: TransportStdio,
		},
		{
			name:      "stdio with the type other clients write, and their extra keys",
			raw:       `{"type":"stdio","command":"srv","disabled":false,"timeout":5}`,
			want:      Config{Command: "srv"},
			transport: TransportStdio,
		},
		{
			name:      "remote defaults to http",
			raw:       `{"url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer x"}}`,
			want:      Config{URL: "https://mcp.example.com/mcp", Type: TransportHTTP, Headers: map[string]string{"Authorization": "Bearer x"}},
			transport: TransportHTTP,
		},
		{
			name:      "remote over sse",
			raw:       `{"url":"http://127.0.0.1:9/sse","type":"sse"}`,
			want:      Config{URL: "http://127.0.0.1:9/sse", Type: TransportSSE},
			transport: TransportSSE,
		},
		{name: "not an object", raw: `"npx srv"`, wantErr: "must be a JSON object"},
		{name: "neither command nor url", raw: `{"args":["x"]}`, wantErr: `give "command" (a local server) or "url"`},
		{name: "both command and url", raw: `{"command":"a","url":"http://x"}`, wantErr: "not both"},
		{name: "args not strings", raw: `{"command":"a","args":"-y srv"}`, wantErr: `"args" must be an array of strings`},
		{name: "env value a number", raw: `{"command":"a","env":{"PORT":8080}}`, wantErr: `"env" must be an object of strings`},
		{name: "command a list", raw: `{"command":["npx","srv"]}`, wantErr: `"command" must be a string`},
		{name: "an unknown type", raw: `{"url":"http://x","type":"websocket"}`, wantErr: `type "websocket": want "http"`},
		{name: "a remote type on a command", raw: `{"command":"a","type":"sse"}`, wantErr: `type "sse" does not go with "command"`},
		{name: "a url that is not http", raw: `{"url":"ftp://example.com"}`, wantErr: "want an http:// or https:// URL"},
		{name: "a url without a host", raw: `{"url":"http:///mcp"}`, wantErr: "want an http:// or https:// URL"},
		{name: "headers on a local server", raw: `{"command":"a","headers":{"X":"y"}}`, wantErr: `"headers" does not apply to a local server`},
		{name: "cwd on a remote server", raw: `{"url":"http://x","cwd":"/"}`, wantErr: `"cwd" does not apply to a remote server`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseConfig(json.RawMessage(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseConfig(%s) = %+v, %v; want an error with %q", tc.raw, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig(%s): %v", tc.raw, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseConfig(%s) = %+v, want %+v", tc.raw, got, tc.want)
			}
			if got.Transport() != tc.transport {
				t.Errorf("transport %q, want %q", got.Transport(), tc.transport)
			}
		})
	}
}
