package docker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
)

func TestJSONCToJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // compact JSON; empty means an error is expected
	}{
		{"plain JSON is unchanged", `{"a": [1, 2], "b": "x"}`, `{"a":[1,2],"b":"x"}`},
		{"line comments", "{\n  // the image\n  \"image\": \"x\" // trailing\n}", `{"image":"x"}`},
		{"block comments", `{/* a */"a": /* b */ 1 /* c
		spanning lines */}`, `{"a":1}`},
		{"trailing comma in an object", `{"a": 1, "b": 2,}`, `{"a":1,"b":2}`},
		{"trailing comma in an array with a comment after it", "[1, 2, // last\n]", `[1,2]`},
		{"nested trailing commas", `{"a": {"b": [1,],}, }`, `{"a":{"b":[1]}}`},
		{"comment markers inside strings are kept", `{"url": "http://x/*y*/", "c": "// no"}`, `{"c":"// no","url":"http://x/*y*/"}`},
		{"escaped quotes inside strings", `{"q": "say \"hi\", // not a comment",}`, `{"q":"say \"hi\", // not a comment"}`},
		{"commas inside strings are not trailing", `{"a": ",}"}`, `{"a":",}"}`},
		{"a UTF-8 byte order mark at the start", "\ufeff{\"a\": 1}", `{"a":1}`},
		{"an empty array stays empty", `{"a": [ ], "b": {}}`, `{"a":[],"b":{}}`},
		{"a lone comma is still an error", `[,]`, ``},
		{"a double comma is still an error", `[1,,]`, ``},
		{"an unclosed comment is an error", `{"a": 1 /* never closed`, ``},
		{"an unclosed string is an error", `{"a": "open`, ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := jsoncToJSON([]byte(tc.in))
			if err == nil && len(out) != len(tc.in) {
				t.Errorf("length changed from %d to %d: offsets would move", len(tc.in), len(out))
			}
			var v any
			if err == nil {
				err = json.Unmarshal(out, &v)
			}
			if tc.want == "" {
				if err == nil {
					t.Fatalf("want an error, got %s", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("error: %v (output %q)", err, out)
			}
			got, _ := json.Marshal(v)
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestJSONCErrorsKeepPositions(t *testing.T) {
	t.Parallel()
	// The error names the line of the original file, whether the JSONC
	// reader or the JSON decoder after it finds it.
	in := "{\n  // comment\n  \"a\": 1,\n  \"b\": ?\n}"
	out, err := jsoncToJSON([]byte(in))
	if err == nil {
		var v any
		err = json.Unmarshal(out, &v)
		if se, ok := err.(*json.SyntaxError); ok {
			line, col := offsetPosition([]byte(in), int(se.Offset)-1)
			err = fmt.Errorf("line %d, column %d: %w", line, col, se)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "line 4,") {
		t.Errorf("error %v, want it on line 4", err)
	}
	if _, err := jsoncToJSON([]byte("{\n\n /* open")); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("unclosed comment error %v should name line 3", err)
	}
}

func TestBaseEnvPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		imagePath string
		env       []string
		want      string
	}{
		{"the image's PATH", "/usr/local/go/bin:/usr/bin:/bin", nil, "/usr/local/go/bin:/usr/bin:/bin"},
		{"the default when the image sets none", "", nil, defaultPath},
		{"--env PATH wins", "/usr/bin", []string{"PATH=/mine:/usr/bin"}, "/mine:/usr/bin"},
	}
	for _, tc := range tests {
		env := baseEnv(Options{Spec: sandbox.Spec{Settings: sandbox.Settings{Env: tc.env}}}, tc.imagePath)
		if got := envValue(env, "PATH"); got != tc.want {
			t.Errorf("%s: PATH %q, want %q", tc.name, got, tc.want)
		}
		if got := envValue(env, "SHIRO_PATH"); got != tc.want {
			t.Errorf("%s: SHIRO_PATH %q, want %q (the login shell's profile.d script restores it)", tc.name, got, tc.want)
		}
	}
}
