package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	registrytypes "github.com/moby/moby/api/types/registry"

	"github.com/shiroagent/shiro/sandbox/regauth"
)

const testSecret = "pw-9c1f-never-shown"

// fakeLookup has a password for alice at every host in hosts; it records
// the hosts it was asked for.
func fakeLookup(asked *[]string, hosts ...string) CredentialLookup {
	return func(_ context.Context, host string) (regauth.Credential, regauth.Source, error) {
		*asked = append(*asked, host)
		src := regauth.Source{File: "/home/u/.docker/config.json"}
		for _, h := range hosts {
			if h == host {
				src.Found = true
				return regauth.Credential{Username: "alice", Password: testSecret}, src, nil
			}
		}
		return regauth.Credential{}, src, nil
	}
}

func decodeAuth(t *testing.T, s string) registrytypes.AuthConfig {
	t.Helper()
	b, err := base64.URLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("RegistryAuth %q: %v", s, err)
	}
	var ac registrytypes.AuthConfig
	if err := json.Unmarshal(b, &ac); err != nil {
		t.Fatal(err)
	}
	return ac
}

func TestPullSendsTheRegistrysCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ref, host, server string
	}{
		{"a registry with a port", "reg.example.com:5000/team/dev:1", "reg.example.com:5000", "reg.example.com:5000"},
		{"Docker Hub under its key", "team/dev:1", "docker.io", regauth.HubKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked []string
			eng := newFakeEngine()
			_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: tc.ref, Workspace: t.TempDir(), Credentials: fakeLookup(&asked, tc.host)}, &imageBuilds{})
			if err != nil {
				t.Fatal(err)
			}
			if len(asked) != 1 || asked[0] != tc.host {
				t.Errorf("asked for %q, want %q", asked, tc.host)
			}
			ac := decodeAuth(t, eng.auths[0])
			if ac.Username != "alice" || ac.Password != testSecret || ac.ServerAddress != tc.server {
				t.Errorf("sent %+v", ac)
			}
		})
	}
	t.Run("none found sends none", func(t *testing.T) {
		t.Parallel()
		var asked []string
		eng := newFakeEngine()
		if _, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "x.example.com/a:1", Workspace: t.TempDir(), Credentials: fakeLookup(&asked)}, &imageBuilds{}); err != nil {
			t.Fatal(err)
		}
		if eng.auths[0] != "" {
			t.Errorf("sent %q", eng.auths[0])
		}
	})
}

func TestPullRefusedNamesTheRegistryAndTheSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stream, hosts, want string
	}{
		{"no credentials", `{"errorDetail":{"message":"Head \"https://reg.example.com/v2/team/dev/manifests/1\": no basic auth credentials"}}`, "",
			"image reg.example.com/team/dev:1: the registry reg.example.com refused access (Head \"https://reg.example.com/v2/team/dev/manifests/1\": no basic auth credentials); credentials: none found in /home/u/.docker/config.json; log in with `docker login reg.example.com`"},
		{"a wrong password", `{"errorDetail":{"message":"unauthorized: authentication required"}}`, "reg.example.com",
			"image reg.example.com/team/dev:1: the registry reg.example.com refused access (unauthorized: authentication required); credentials: from auths in /home/u/.docker/config.json, refused; log in with `docker login reg.example.com`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked []string
			eng := newFakeEngine()
			eng.pullErr = tc.stream
			_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "reg.example.com/team/dev:1", Workspace: t.TempDir(), Credentials: fakeLookup(&asked, tc.hosts)}, &imageBuilds{})
			var ae *RegistryAuthError
			if !errors.As(err, &ae) || err.Error() != tc.want {
				t.Fatalf("error %v\nwant %s", err, tc.want)
			}
			if strings.Contains(fmt.Sprintf("%v %+v", err, err), testSecret) {
				t.Error("the error shows the password")
			}
		})
	}
	t.Run("another failure is not about credentials", func(t *testing.T) {
		t.Parallel()
		eng := newFakeEngine()
		eng.pullErr = `{"errorDetail":{"message":"manifest unknown"}}`
		var asked []string
		_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "reg.example.com/team/dev:1", Workspace: t.TempDir(), Credentials: fakeLookup(&asked)}, &imageBuilds{})
		var ae *RegistryAuthError
		if err == nil || errors.As(err, &ae) {
			t.Fatalf("error %v", err)
		}
	})
}

func TestBuildGetsTheCredentialsOfItsFROMRegistries(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"Dockerfile": `ARG REG
FROM reg.example.com:5000/team/base:1 AS base
FROM --platform=linux/amd64 golang:1.22
FROM ${REG}/tools:2
FROM base
FROM scratch
`})
	var asked []string
	eng := newFakeEngine()
	_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "./Dockerfile", Workspace: ws, Root: openRoot(t, ws),
		Credentials: fakeLookup(&asked, "reg.example.com:5000", "docker.io")}, &imageBuilds{})
	if err != nil {
		t.Fatal(err)
	}
	got := eng.builds[0].AuthConfigs
	if len(got) != 2 || got["reg.example.com:5000"].Password != testSecret || got[regauth.HubKey].Username != "alice" || got[regauth.HubKey].ServerAddress != regauth.HubKey {
		t.Errorf("AuthConfigs %+v", got)
	}
	if strings.Join(asked, " ") != "reg.example.com:5000 docker.io" {
		t.Errorf("asked %q", asked)
	}

	// The build argument names the registry.
	asked = nil
	reg := "other.example.com"
	ba := newBuildAuth(t.Context(), []byte("FROM ${REG}/tools:2\n"), map[string]*string{"REG": &reg}, fakeLookup(&asked, reg), nil)
	if ba.configs[reg].Password != testSecret || strings.Join(asked, " ") != reg {
		t.Errorf("with REG: %+v, asked %q", ba.configs, asked)
	}

	// An image the engine has is not pulled: its registry is not asked.
	asked = nil
	df := []byte("FROM other.example.com/tools:2 AS tools\nFROM reg.example.com:5000/team/dev:1\n")
	ba = newBuildAuth(t.Context(), df, nil, fakeLookup(&asked, reg, "reg.example.com:5000"), func(ref string) bool { return ref == "other.example.com/tools:2" })
	if strings.Join(asked, " ") != "reg.example.com:5000" || len(ba.configs) != 1 {
		t.Errorf("with a local image: %+v, asked %q", ba.configs, asked)
	}
}

func TestBuildRefusedNamesTheFROMRegistry(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"Dockerfile": "FROM reg.example.com/team/base:1\nRUN true\n"})
	eng := newFakeEngine()
	eng.buildOut = `{"stream":"Step 1/2 : FROM reg.example.com/team/base:1"}` + "\n" +
		`{"errorDetail":{"message":"Head \"https://reg.example.com/v2/team/base/manifests/1\": no basic auth credentials"}}`
	var asked []string
	_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "./Dockerfile", Workspace: ws, Root: openRoot(t, ws), Credentials: fakeLookup(&asked)}, &imageBuilds{})
	var ae *RegistryAuthError
	if !errors.As(err, &ae) || ae.Registry != "reg.example.com" || !strings.Contains(err.Error(), "none found in /home/u/.docker/config.json; log in with `docker login reg.example.com`") {
		t.Fatalf("error %v", err)
	}
}

func TestEncodeRegistryAuth(t *testing.T) {
	t.Parallel()
	if got := EncodeRegistryAuth("docker.io", regauth.Credential{}); got != "" {
		t.Errorf("no credential: %q", got)
	}
	ac := decodeAuth(t, EncodeRegistryAuth("docker.io", regauth.Credential{IdentityToken: "tok"}))
	if ac.IdentityToken != "tok" || ac.Username != "" || ac.ServerAddress != regauth.HubKey {
		t.Errorf("identity token: %+v", ac)
	}
}

func TestPullWhenTheHelperFails(t *testing.T) {
	t.Parallel()
	failing := func(context.Context, string) (regauth.Credential, regauth.Source, error) {
		return regauth.Credential{}, regauth.Source{File: "/c.json", Helper: "docker-credential-desktop"},
			&regauth.HelperError{Helper: "docker-credential-desktop", Registry: "docker.io", Err: errors.New("not on PATH")}
	}
	// A public image needs no credentials: the pull goes on without them.
	var progress strings.Builder
	eng := newFakeEngine()
	if _, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "golang:1.22", Workspace: t.TempDir(), Progress: &progress, Credentials: failing}, &imageBuilds{}); err != nil {
		t.Fatal(err)
	}
	if eng.auths[0] != "" || !strings.Contains(progress.String(), "[notice] the credential helper docker-credential-desktop for docker.io: not on PATH; pulling without credentials") {
		t.Errorf("auth %q, progress:\n%s", eng.auths[0], progress.String())
	}
	// A refusal says why none were sent.
	eng = newFakeEngine()
	eng.pullErr = `{"errorDetail":{"message":"pull access denied for team/dev"}}`
	_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "team/dev:1", Workspace: t.TempDir(), Credentials: failing}, &imageBuilds{})
	if err == nil || !strings.Contains(err.Error(), "credentials: none sent, as looking them up failed: the credential helper docker-credential-desktop for docker.io: not on PATH; log in with `docker login docker.io`") {
		t.Errorf("error %v", err)
	}
}

func TestIsAuthError(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]bool{
		`Head "https://r.example.com/v2/a/manifests/1": no basic auth credentials`:                 true,
		"unauthorized: authentication required":                                                    true,
		"pull access denied for team/dev, repository does not exist or may require 'docker login'": true,
		"denied: requested access to the resource is denied":                                       true,
		"manifest for r.example.com/a:1 not found: manifest unknown":                               false,
		"open /var/lib/docker/tmp/x: permission denied":                                            false,
		"dial tcp: lookup r.example.com: no such host":                                             false,
	} {
		if got := isAuthError(errors.New(msg)); got != want {
			t.Errorf("%q: %v, want %v", msg, got, want)
		}
	}
}
