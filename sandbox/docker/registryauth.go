package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	registrytypes "github.com/moby/moby/api/types/registry"

	"github.com/shiroagent/shiro/sandbox/regauth"
)

// CredentialLookup finds a registry host's credential and says where it
// looked (regauth.Lookup).
type CredentialLookup func(ctx context.Context, host string) (regauth.Credential, regauth.Source, error)

// orLookup is lookup, or the docker config file's when nil.
func orLookup(lookup CredentialLookup) CredentialLookup {
	if lookup == nil {
		return regauth.Lookup
	}
	return lookup
}

// RegistryHost is the registry an image reference pulls from, as `docker
// login` names it ("docker.io" for Docker Hub).
func RegistryHost(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", err
	}
	return reference.Domain(named), nil
}

// authConfig is a credential as the engine takes it.
func authConfig(host string, c regauth.Credential) registrytypes.AuthConfig {
	return registrytypes.AuthConfig{
		Username:      c.Username,
		Password:      c.Password,
		IdentityToken: c.IdentityToken,
		ServerAddress: regauth.Key(host),
	}
}

// EncodeRegistryAuth is the X-Registry-Auth value of a credential (a pull's
// or a push's RegistryAuth): base64url JSON. No credential is "".
func EncodeRegistryAuth(host string, c regauth.Credential) string {
	if c.Empty() {
		return ""
	}
	b, err := json.Marshal(authConfig(host, c))
	if err != nil {
		return ""
	}
	return base64.URLEncoding.EncodeToString(b)
}

// registryAuth is what a pull sends to one registry and where it came
// from.
type registryAuth struct {
	// header is the pull's RegistryAuth ("" for none).
	header string
	host   string
	src    regauth.Source
	// lookupErr is why no credential could be looked up (a credential
	// helper that is missing or failed): the pull goes on without one, as
	// a public image needs none, and a refusal then says why.
	lookupErr error
}

// pullAuth finds the credential of ref's registry.
// A failed lookup is a notice on progress.
func pullAuth(ctx context.Context, ref string, lookup CredentialLookup, progress io.Writer) (registryAuth, error) {
	host, err := RegistryHost(ref)
	if err != nil {
		return registryAuth{}, err
	}
	cred, src, err := orLookup(lookup)(ctx, host)
	ra := registryAuth{host: host, src: src, lookupErr: err}
	if err == nil {
		ra.header = EncodeRegistryAuth(host, cred)
	} else {
		fmt.Fprintf(progress, "[notice] %v; pulling without credentials\n", err)
	}
	return ra, nil
}

// buildAuth is what a classic build sends for the registries its FROM
// lines name.
type buildAuth struct {
	// configs is ImageBuildOptions.AuthConfigs, keyed as the engine looks
	// them up (regauth.Key).
	configs map[string]registrytypes.AuthConfig
	// sources says, per registry host, where its credential came from;
	// errs why a lookup failed.
	sources map[string]regauth.Source
	errs    map[string]error
}

// newBuildAuth finds the credentials for every registry the Dockerfile
// df's FROM lines name (${ARG}s expanded from args), for a classic build's
// AuthConfigs. An image the engine has (have) is used as it is, so its
// registry is not asked for (a credential helper may prompt). A registry
// whose lookup fails gets none: the build then fails with an error that
// says so.
func newBuildAuth(ctx context.Context, df []byte, args map[string]*string, lookup CredentialLookup, have func(ref string) bool) buildAuth {
	ba := buildAuth{configs: map[string]registrytypes.AuthConfig{}, sources: map[string]regauth.Source{}, errs: map[string]error{}}
	lookup = orLookup(lookup)
	for _, base := range dockerfileBases(df) {
		ref := expandArgs(base, args)
		host, err := RegistryHost(ref)
		if err != nil {
			continue // an unset ARG, or scratch's like
		}
		if have != nil && have(ref) {
			continue
		}
		if _, done := ba.sources[host]; done {
			continue
		}
		cred, src, err := lookup(ctx, host)
		ba.sources[host] = src
		if err != nil {
			ba.errs[host] = err
			continue
		}
		if cred.Empty() {
			continue
		}
		ba.configs[regauth.Key(host)] = authConfig(host, cred)
	}
	return ba
}

// expandArgs replaces $NAME and ${NAME} with the build argument's value.
func expandArgs(s string, args map[string]*string) string {
	return os.Expand(s, func(name string) string {
		if v := args[name]; v != nil {
			return *v
		}
		return ""
	})
}

// explain turns a pull's refusal by the registry into a
// RegistryAuthError.
func (ra registryAuth) explain(err error) error {
	if err == nil || !isAuthError(err) {
		return err
	}
	return &RegistryAuthError{Registry: ra.host, Source: ra.src, LookupErr: ra.lookupErr, Err: err}
}

// explain turns a build whose FROM step the registry refused into a
// RegistryAuthError naming the step's registry.
func (ba buildAuth) explain(err error, args map[string]*string) error {
	var be *ImageBuildError
	if !errors.As(err, &be) || !isAuthError(err) {
		return err
	}
	keyword, image, _ := strings.Cut(be.Instruction, " ")
	if !strings.EqualFold(keyword, "FROM") {
		return err
	}
	fields := strings.Fields(image)
	for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
		fields = fields[1:]
	}
	if len(fields) == 0 {
		return err
	}
	host, herr := RegistryHost(expandArgs(fields[0], args))
	if herr != nil {
		return err
	}
	return &RegistryAuthError{Registry: host, Source: ba.sources[host], LookupErr: ba.errs[host], Err: err}
}

// isAuthError reports whether an engine error is a registry's 401 or 403.
func isAuthError(err error) bool {
	if cerrdefs.IsUnauthorized(err) || cerrdefs.IsPermissionDenied(err) {
		return true
	}
	msg := strings.ToLower(err.Error())
	// The registry's error codes (UNAUTHORIZED, DENIED) as the engine
	// words them; a local "permission denied" is not one.
	for _, s := range []string{"no basic auth credentials", "unauthorized", "authentication required", "access denied",
		"access to the resource is denied", "denied:"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// RegistryAuthError is a registry that refused a pull (401 or 403): it
// names the registry, where the credentials came from and what to do.
type RegistryAuthError struct {
	// Registry is the host ("docker.io" for Docker Hub).
	Registry string
	// Source is where the credential came from, or where none was found.
	Source regauth.Source
	// LookupErr is why none could be looked up (a failed helper).
	LookupErr error
	// Err is the engine's error.
	Err error
}

func (e *RegistryAuthError) Error() string {
	creds := e.Source.String()
	switch {
	case e.LookupErr != nil:
		creds = fmt.Sprintf("none sent, as looking them up failed: %v", e.LookupErr)
	case e.Source.Found:
		creds = "from " + creds + ", refused"
	}
	return fmt.Sprintf("the registry %s refused access (%v); credentials: %s; log in with `docker login %s`",
		e.Registry, e.Err, creds, e.Registry)
}

func (e *RegistryAuthError) Unwrap() error { return e.Err }
