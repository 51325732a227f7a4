// Package regauth finds the credentials for an image registry as the docker
// CLI does: in the docker config file ($DOCKER_CONFIG/config.json or
// ~/.docker/config.json), through its auths, credsStore and credHelpers,
// asking a credential helper (docker-credential-NAME) over the helper
// protocol where the file names one.
//
// The credentials are for the engine and BuildKit on the host only: they
// never go into the sandbox, a log, a session record or an error, and
// Credential's String hides them.
package regauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker-credential-helpers/client"
	"github.com/docker/docker-credential-helpers/credentials"
)

// HubKey is the key Docker Hub's credentials go by in the config file and
// in a credential helper, whatever name the image uses (docker.io,
// index.docker.io, registry-1.docker.io).
const HubKey = "https://index.docker.io/v1/"

// ConfigFileName is the config file's name in its directory.
const ConfigFileName = "config.json"

// helperTimeout bounds one call of a credential helper.
const helperTimeout = time.Minute

// Credential is what a registry gets: a user and password, or an identity
// token (an OAuth refresh token) that the engine trades for an access
// token.
type Credential struct {
	Username      string
	Password      string
	IdentityToken string
}

// Empty reports whether there is nothing to send.
func (c Credential) Empty() bool {
	return c.Username == "" && c.Password == "" && c.IdentityToken == ""
}

// String names the kind of credential, never its secret.
func (c Credential) String() string {
	switch {
	case c.IdentityToken != "":
		return "an identity token"
	case c.Empty():
		return "no credentials"
	}
	return "a password for " + c.Username
}

// GoString keeps %#v from printing the secret too.
func (c Credential) GoString() string { return "regauth.Credential{" + c.String() + "}" }

// Source says where a credential was looked for and found, for messages.
type Source struct {
	// File is the config file read ("" when there is none).
	File string
	// Helper is the credential helper's program (docker-credential-NAME)
	// when one was asked.
	Helper string
	// Found is set when a credential was found.
	Found bool
}

// String is the source as an error message names it: "the credential
// helper docker-credential-pass", "auths in ~/.docker/config.json", "none
// found in …".
func (s Source) String() string {
	switch {
	case s.Found && s.Helper != "":
		return "the credential helper " + s.Helper
	case s.Found:
		return "auths in " + s.File
	case s.Helper != "":
		return "none found (the credential helper " + s.Helper + " has none)"
	case s.File != "":
		return "none found in " + s.File
	}
	return "none found (no docker config file)"
}

// Key is the name a registry host's credentials go by: HubKey for Docker
// Hub, else the host (with its port) as an image reference names it.
func Key(host string) string {
	switch host {
	case "", "docker.io", "index.docker.io", "registry-1.docker.io", HubKey:
		return HubKey
	}
	return host
}

// Config is a docker config file's registry part.
type Config struct {
	// Path is the file it was read from; empty when there is none.
	Path string

	Auths       map[string]AuthEntry `json:"auths"`
	CredsStore  string               `json:"credsStore"`
	CredHelpers map[string]string    `json:"credHelpers"`

	// run runs a credential helper; nil means the real program on PATH.
	run runFunc
}

// AuthEntry is one entry of auths: a base64 "user:password" in Auth (or
// the two in fields of their own, as old files have them), and an
// identity token.
//
// Its String hides the secrets.
type AuthEntry struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
}

func (e AuthEntry) String() string { return "regauth.AuthEntry{…}" }

// GoString keeps %#v from printing the secrets too.
func (e AuthEntry) GoString() string { return e.String() }

// runFunc runs the program with args, stdin as its input, and returns its
// standard output.
type runFunc func(ctx context.Context, program string, stdin string, args ...string) ([]byte, error)

// ConfigPath is the config file the docker CLI reads:
// $DOCKER_CONFIG/config.json, else ~/.docker/config.json.
func ConfigPath() (string, error) {
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return filepath.Join(dir, ConfigFileName), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the docker config file: %w", err)
	}
	return filepath.Join(home, ".docker", ConfigFileName), nil
}

// Load reads the config file at ConfigPath. A missing file is an empty
// config: no credentials.
func Load() (*Config, error) {
	p, err := ConfigPath()
	if err != nil {
		return nil, err
	}
	return LoadFile(p)
}

// LoadFile reads the config file at path; a missing one is an empty
// config with no Path.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the docker config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// Parse decodes a config file's content. The error never quotes it.
func Parse(data []byte) (*Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return &c, nil
	}
	if err := json.Unmarshal(data, &c); err != nil {
		// json's syntax and type errors name offsets and types, not
		// values.
		return nil, fmt.Errorf("not a docker config file: %w", err)
	}
	return &c, nil
}

// Lookup finds the credential for a registry host as the docker CLI does:
// the credHelpers entry for its key, else the credsStore helper, asked
// for the key; auths when no helper has one. No credential is no error:
// Source says where it looked.
func (c *Config) Lookup(ctx context.Context, host string) (Credential, Source, error) {
	key := Key(host)
	src := Source{File: c.Path}
	helper := c.CredHelpers[key]
	if helper == "" {
		helper = c.CredsStore
	}
	if helper != "" {
		src.Helper = "docker-credential-" + helper
		cred, err := c.fromHelper(ctx, src.Helper, key)
		if err != nil {
			return Credential{}, src, err
		}
		if !cred.Empty() {
			src.Found = true
			return cred, src, nil
		}
	}
	if cred, ok := c.fromAuths(key); ok {
		src.Helper, src.Found = "", true
		return cred, src, nil
	}
	return Credential{}, src, nil
}

// fromAuths reads key's auths entry, or, as the docker CLI does for files
// of older versions, the entry whose key is a URL of the same host.
func (c *Config) fromAuths(key string) (Credential, bool) {
	e, ok := c.Auths[key]
	if !ok {
		for k, v := range c.Auths {
			if k != HubKey && hostOf(k) == key {
				e, ok = v, true
				break
			}
		}
	}
	if !ok {
		return Credential{}, false
	}
	cred := Credential{Username: e.Username, Password: e.Password, IdentityToken: e.IdentityToken}
	if e.Auth != "" {
		user, password, ok := decodeAuth(e.Auth)
		if ok {
			cred.Username, cred.Password = user, password
		}
	}
	return cred, !cred.Empty()
}

// decodeAuth splits a base64 "user:password".
func decodeAuth(s string) (user, password string, ok bool) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(s); err != nil {
			return "", "", false
		}
	}
	user, password, ok = strings.Cut(string(b), ":")
	return user, password, ok && user != ""
}

// hostOf strips a URL's scheme and path: "https://reg.example.com/v1/"
// is reg.example.com.
func hostOf(k string) string {
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	host, _, _ := strings.Cut(k, "/")
	return host
}

// fromHelper asks the credential helper program for key's credential;
// one it has none for is no error.
func (c *Config) fromHelper(ctx context.Context, program, key string) (Credential, error) {
	run := c.run
	if run == nil {
		run = runProgram
	}
	ctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	got, err := client.Get(func(args ...string) client.Program {
		return &helperCall{ctx: ctx, run: run, program: program, args: args}
	}, key)
	if credentials.IsErrCredentialsNotFound(err) {
		return Credential{}, nil
	}
	if err != nil {
		return Credential{}, &HelperError{Helper: program, Registry: key, Err: err}
	}
	// A helper stores an identity token under the user "<token>".
	if got.Username == "<token>" {
		return Credential{IdentityToken: got.Secret}, nil
	}
	return Credential{Username: got.Username, Password: got.Secret}, nil
}

// HelperError is a credential helper that failed (it is missing, or
// answered with an error).
type HelperError struct {
	Helper   string
	Registry string
	Err      error
}

func (e *HelperError) Error() string {
	return fmt.Sprintf("the credential helper %s for %s: %v", e.Helper, e.Registry, e.Err)
}

func (e *HelperError) Unwrap() error { return e.Err }

// helperCall is one call of a helper as the protocol client's Program.
type helperCall struct {
	ctx     context.Context
	run     runFunc
	program string
	args    []string
	stdin   string
}

func (h *helperCall) Input(in io.Reader) {
	b, _ := io.ReadAll(in)
	h.stdin = string(b)
}

func (h *helperCall) Output() ([]byte, error) {
	return h.run(h.ctx, h.program, h.stdin, h.args...)
}

// runProgram runs a helper found on PATH. Its standard error is kept for
// the error, not printed over shiro's screen.
func runProgram(ctx context.Context, program, stdin string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(program)
	if err != nil {
		return nil, fmt.Errorf("%s is not on PATH: %w", program, errors.Unwrap(err))
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && stderr.Len() > 0 {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		err = fmt.Errorf("%w: %s", err, msg)
	}
	return out, err
}

// Lookup finds host's credential in the docker config file (Load, then
// Config.Lookup).
func Lookup(ctx context.Context, host string) (Credential, Source, error) {
	c, err := Load()
	if err != nil {
		return Credential{}, Source{}, err
	}
	return c.Lookup(ctx, host)
}
