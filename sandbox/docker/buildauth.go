package docker

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
	registrytypes "github.com/moby/moby/api/types/registry"
)

// identityTokenUser is the user name that, as in the docker CLI's
// config, says the secret is an identity token rather than a password.
const identityTokenUser = "<token>"

// dockerHubHost is what BuildKit asks credentials for when it pulls
// from Docker Hub; the credentials function gets "docker.io" instead, as
// the image reference writes it.
const dockerHubHost = "registry-1.docker.io"

// fromImages lists the images the FROM lines of df name, each once:
// stage names and references built from build arguments (they are
// resolved by the builder) are skipped.
func fromImages(df []byte) []reference.Named {
	var (
		refs   []reference.Named
		stages []string
	)
	sc := bufio.NewScanner(bytes.NewReader(df))
	sc.Buffer(nil, len(df)+1)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
			continue
		}
		args := fields[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			args = args[1:]
		}
		if len(args) == 0 {
			continue
		}
		img := args[0]
		earlier := slices.Contains(stages, strings.ToLower(img))
		if len(args) >= 3 && strings.EqualFold(args[1], "AS") {
			stages = append(stages, strings.ToLower(args[2]))
		}
		if earlier || strings.Contains(img, "$") || strings.EqualFold(img, "scratch") {
			continue
		}
		named, err := reference.ParseNormalizedNamed(img)
		if err != nil || slices.ContainsFunc(refs, func(r reference.Named) bool { return r.String() == named.String() }) {
			continue
		}
		refs = append(refs, named)
	}
	return refs
}

// registryHosts are the registries of refs, each once.
func registryHosts(refs []reference.Named) []string {
	var hosts []string
	for _, r := range refs {
		if h := reference.Domain(r); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// classicAuthConfigs are the credentials the classic builder gets (the
// build's registry-config header) for the registries hosts, from creds;
// a host without credentials is left out.
func classicAuthConfigs(hosts []string, creds func(host string) (string, string, error)) (map[string]registrytypes.AuthConfig, error) {
	if creds == nil || len(hosts) == 0 {
		return nil, nil
	}
	m := map[string]registrytypes.AuthConfig{}
	for _, h := range hosts {
		user, secret, err := creds(h)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s: %w", h, err)
		}
		if user == "" && secret == "" {
			continue
		}
		key := h
		if h == "docker.io" {
			key = "https://index.docker.io/v1/" // the engine's key for Docker Hub
		}
		ac := registrytypes.AuthConfig{ServerAddress: key, Username: user, Password: secret}
		if user == identityTokenUser {
			ac = registrytypes.AuthConfig{ServerAddress: key, IdentityToken: secret}
		}
		m[key] = ac
	}
	return m, nil
}
