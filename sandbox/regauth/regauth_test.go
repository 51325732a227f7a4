package regauth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// fakeHelper puts docker-credential-NAME on PATH: it answers get for the
// keys in creds (a JSON answer each) and "credentials not found" for the
// rest, and logs every call to the returned file.
func fakeHelper(t *testing.T, name string, creds map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	var cases strings.Builder
	for k, v := range creds {
		fmt.Fprintf(&cases, "  '%s') printf '%%s' '%s';;\n", k, v)
	}
	script := fmt.Sprintf(`#!/bin/sh
read -r url
echo "$1 $url" >> '%s'
case "$url" in
%s  *) echo "credentials not found in native keychain"; exit 1;;
esac
`, log, cases.String())
	if err := os.WriteFile(filepath.Join(dir, "docker-credential-"+name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

func parse(t *testing.T, js string) *Config {
	t.Helper()
	c, err := Parse([]byte(js))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	c.Path = "/home/u/.docker/config.json"
	return c
}

func TestLookupAuths(t *testing.T) {
	for _, tc := range []struct {
		name, config, host string
		want               Credential
	}{
		{"base64 auth of a host with a port", `{"auths":{"reg.example.com:5000":{"auth":"` + b64("alice:pw:with:colons") + `"}}}`,
			"reg.example.com:5000", Credential{Username: "alice", Password: "pw:with:colons"}},
		{"auth without padding", `{"auths":{"reg.example.com":{"auth":"` + strings.TrimRight(b64("al:p"), "=") + `"}}}`,
			"reg.example.com", Credential{Username: "al", Password: "p"}},
		{"username and password fields", `{"auths":{"reg.example.com":{"username":"bob","password":"pw"}}}`,
			"reg.example.com", Credential{Username: "bob", Password: "pw"}},
		{"an identity token", `{"auths":{"reg.example.com":{"identitytoken":"tok"}}}`,
			"reg.example.com", Credential{IdentityToken: "tok"}},
		{"an old file's URL key matches its host", `{"auths":{"https://reg.example.com/v1/":{"auth":"` + b64("old:pw") + `"}}}`,
			"reg.example.com", Credential{Username: "old", Password: "pw"}},
		{"Docker Hub by docker.io", `{"auths":{"https://index.docker.io/v1/":{"auth":"` + b64("hub:pw") + `"}}}`,
			"docker.io", Credential{Username: "hub", Password: "pw"}},
		{"Docker Hub by registry-1.docker.io (BuildKit's name)", `{"auths":{"https://index.docker.io/v1/":{"auth":"` + b64("hub:pw") + `"}}}`,
			"registry-1.docker.io", Credential{Username: "hub", Password: "pw"}},
		{"a docker.io key is not Hub's", `{"auths":{"docker.io":{"auth":"` + b64("hub:pw") + `"}}}`,
			"docker.io", Credential{}},
		{"Hub's key is not another host's", `{"auths":{"https://index.docker.io/v1/":{"auth":"` + b64("hub:pw") + `"}}}`,
			"index.docker.io.example.com", Credential{}},
		{"another host", `{"auths":{"reg.example.com":{"auth":"` + b64("a:b") + `"}}}`,
			"other.example.com", Credential{}},
		{"the same host on another port", `{"auths":{"reg.example.com:5000":{"auth":"` + b64("a:b") + `"}}}`,
			"reg.example.com", Credential{}},
		{"an empty entry (credsStore's placeholder)", `{"auths":{"reg.example.com":{}}}`,
			"reg.example.com", Credential{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, src, err := parse(t, tc.config).Lookup(t.Context(), tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %#v, want %#v", got, tc.want)
				t.Errorf("users %q, want %q", got.Username, tc.want.Username)
			}
			if src.Found != !tc.want.Empty() {
				t.Errorf("Found = %v", src.Found)
			}
			want := "auths in /home/u/.docker/config.json"
			if tc.want.Empty() {
				want = "none found in /home/u/.docker/config.json"
			}
			if src.String() != want {
				t.Errorf("source %q, want %q", src, want)
			}
		})
	}
}

func TestLookupHelpers(t *testing.T) {
	calls := fakeHelper(t, "fake", map[string]string{
		"reg.example.com":             `{"ServerURL":"reg.example.com","Username":"bob","Secret":"helper-pw"}`,
		"https://index.docker.io/v1/": `{"ServerURL":"https://index.docker.io/v1/","Username":"<token>","Secret":"hub-token"}`,
	})
	fakeHelper(t, "other", map[string]string{
		"team.example.com": `{"Username":"carol","Secret":"other-pw"}`,
	})
	for _, tc := range []struct {
		name, config, host string
		want               Credential
		source             string
	}{
		{"credsStore", `{"credsStore":"fake"}`, "reg.example.com",
			Credential{Username: "bob", Password: "helper-pw"}, "the credential helper docker-credential-fake"},
		{"credsStore asked for Hub's key, a <token> user is an identity token", `{"credsStore":"fake"}`, "docker.io",
			Credential{IdentityToken: "hub-token"}, "the credential helper docker-credential-fake"},
		{"credHelpers for the registry before credsStore", `{"credsStore":"fake","credHelpers":{"team.example.com":"other"}}`, "team.example.com",
			Credential{Username: "carol", Password: "other-pw"}, "the credential helper docker-credential-other"},
		{"credHelpers of another registry leave credsStore", `{"credsStore":"fake","credHelpers":{"team.example.com":"other"}}`, "reg.example.com",
			Credential{Username: "bob", Password: "helper-pw"}, "the credential helper docker-credential-fake"},
		{"credHelpers without credsStore", `{"credHelpers":{"team.example.com":"other"},"auths":{"reg.example.com":{"auth":"` + b64("a:b") + `"}}}`, "team.example.com",
			Credential{Username: "carol", Password: "other-pw"}, "the credential helper docker-credential-other"},
		{"a helper without an entry falls back to auths", `{"credsStore":"fake","auths":{"x.example.com":{"auth":"` + b64("a:b") + `"}}}`, "x.example.com",
			Credential{Username: "a", Password: "b"}, "auths in /home/u/.docker/config.json"},
		{"a helper without an entry and no auths", `{"credsStore":"fake"}`, "x.example.com",
			Credential{}, "none found (the credential helper docker-credential-fake has none)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, src, err := parse(t, tc.config).Lookup(t.Context(), tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
			if src.String() != tc.source {
				t.Errorf("source %q, want %q", src, tc.source)
			}
		})
	}
	log, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "get https://index.docker.io/v1/\n") || !strings.Contains(string(log), "get reg.example.com\n") {
		t.Errorf("the helper was not asked with get and the registry's key:\n%s", log)
	}
}

func TestHelperFailures(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, src, err := parse(t, `{"credsStore":"missing"}`).Lookup(t.Context(), "reg.example.com")
	var he *HelperError
	if !errors.As(err, &he) || he.Helper != "docker-credential-missing" || !strings.Contains(err.Error(), "not on PATH") {
		t.Fatalf("err = %v, want a HelperError naming docker-credential-missing not on PATH", err)
	}
	if src.Helper != "docker-credential-missing" {
		t.Errorf("source %+v", src)
	}

	c := parse(t, `{"credsStore":"broken"}`)
	c.run = func(context.Context, string, string, ...string) ([]byte, error) {
		return []byte("the keychain is locked"), errors.New("exit status 1")
	}
	if _, _, err := c.Lookup(t.Context(), "reg.example.com"); err == nil || !strings.Contains(err.Error(), "the keychain is locked") || !strings.Contains(err.Error(), "docker-credential-broken") {
		t.Errorf("err = %v, want the helper's answer and its name", err)
	}
}

func TestSecretsStayOutOfText(t *testing.T) {
	c := Credential{Username: "alice", Password: "hunter2-secret", IdentityToken: ""}
	tok := Credential{IdentityToken: "tok-secret"}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%v %+v %#v", tok, tok, tok)} {
		if strings.Contains(s, "secret") {
			t.Errorf("%q shows the secret", s)
		}
	}
	cfg := parse(t, `{"auths":{"r":{"auth":"`+b64("u:hunter2-secret")+`","password":"hunter2-secret","identitytoken":"tok-secret"}}}`)
	if s := fmt.Sprintf("%v %+v %#v", cfg, *cfg, cfg.Auths); strings.Contains(s, "secret") || strings.Contains(s, b64("u:hunter2-secret")) {
		t.Errorf("a printed config shows a secret: %s", s)
	}
	_, err := Parse([]byte(`{"auths":{"r":{"auth":12345678}}, "x": "hunter2-secret"`))
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "12345678") {
		t.Errorf("parse error %v: want one that quotes nothing of the file", err)
	}
}

func TestConfigPath(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	if p, _ := ConfigPath(); p != filepath.Join(dir, "config.json") {
		t.Errorf("with DOCKER_CONFIG: %s", p)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths":{"reg.example.com":{"auth":"`+b64("u:p")+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cred, _, err := Lookup(t.Context(), "reg.example.com")
	if err != nil || cred.Username != "u" || cred.Password != "p" {
		t.Errorf("Lookup = %+v, %v", cred, err)
	}
	_, src, err := Lookup(t.Context(), "other.example.com")
	if err != nil || src.String() != "none found in "+filepath.Join(dir, "config.json") {
		t.Errorf("Lookup of another host: %v, %v", src, err)
	}

	t.Setenv("DOCKER_CONFIG", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	if p, _ := ConfigPath(); p != filepath.Join(home, ".docker", "config.json") {
		t.Errorf("without DOCKER_CONFIG: %s", p)
	}
	_, src, err = Lookup(t.Context(), "reg.example.com")
	if err != nil || src.Found || src.String() != "none found (no docker config file)" {
		t.Errorf("no file: %v, %v", src, err)
	}
}
