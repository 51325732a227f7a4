package docker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/session/auth"
	"github.com/moby/buildkit/session/secrets/secretsprovider"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
	"google.golang.org/grpc"

	"github.com/shiroagent/shiro/sandbox"
)

// sessionAPI is the part of the client a BuildKit build needs beside the
// image calls: the engine's builder, and the /session endpoint that
// serves the build its secrets and registry credentials.
type sessionAPI interface {
	Ping(ctx context.Context, opts client.PingOptions) (client.PingResult, error)
	DialHijack(ctx context.Context, url, proto string, meta map[string][]string) (net.Conn, error)
}

var _ sessionAPI = (*client.Client)(nil)

// builderKind is the engine builder a project build runs on.
type builderKind struct {
	buildkit bool
	// oldFrontend says the engine's built-in Dockerfile frontend predates
	// heredocs and COPY --link (Docker 20.10, API 1.41 and older).
	oldFrontend bool
}

// chooseBuilder asks the engine which builder it has: BuildKit unless
// its ping says the classic builder ("Builder-Version: 1") or it is not
// a Linux engine. Docker 20.10 sends no Builder-Version and builds with
// BuildKit when asked (version=2).
func chooseBuilder(ctx context.Context, api any) builderKind {
	sa, ok := api.(sessionAPI)
	if !ok {
		return builderKind{}
	}
	p, err := sa.Ping(ctx, client.PingOptions{})
	if err != nil || p.BuilderVersion == build.BuilderV1 || (p.OSType != "" && p.OSType != "linux") {
		return builderKind{}
	}
	return builderKind{buildkit: true, oldFrontend: !apiAtLeast(p.APIVersion, 1, 42)}
}

// apiAtLeast says whether the API version v ("1.41") is at least
// major.minor; an unreadable version counts as old.
func apiAtLeast(v string, major, minor int) bool {
	var a, b int
	if _, err := fmt.Sscanf(v, "%d.%d", &a, &b); err != nil {
		return false
	}
	return a > major || a == major && b >= minor
}

// dockerfileFeatures are the Dockerfile features that need BuildKit, or a
// newer Dockerfile frontend than some engines have built in.
type dockerfileFeatures struct {
	Syntax  string // the image a "# syntax=" directive names
	Mount   bool   // RUN --mount=…
	Heredoc bool   // RUN <<EOF, COPY <<EOF …
	Link    bool   // COPY --link, ADD --link
}

var (
	syntaxDirective = regexp.MustCompile(`(?i)^#\s*syntax\s*=\s*(\S+)`)
	otherDirective  = regexp.MustCompile(`(?i)^#\s*[a-z]+\s*=`)
	heredocMarker   = regexp.MustCompile(`(?:^|\s)<<-?\s*["']?[A-Za-z_][A-Za-z0-9_]*["']?`)
)

// scanDockerfile finds the features of df that not every builder has.
// It reads instructions as the parser does: continuation lines joined,
// comments skipped, parser directives only before the first instruction.
func scanDockerfile(df []byte) dockerfileFeatures {
	var f dockerfileFeatures
	sc := bufio.NewScanner(bytes.NewReader(df))
	sc.Buffer(nil, len(df)+1)
	directives := true
	var ins strings.Builder
	flush := func() {
		line := strings.TrimSpace(ins.String())
		ins.Reset()
		if line == "" {
			return
		}
		word, rest, _ := strings.Cut(line, " ")
		word = strings.ToUpper(word)
		flags := instructionFlags(rest)
		switch word {
		case "RUN":
			f.Mount = f.Mount || slices.ContainsFunc(flags, func(s string) bool { return strings.HasPrefix(s, "--mount=") })
		case "COPY", "ADD":
			f.Link = f.Link || slices.ContainsFunc(flags, func(s string) bool { return s == "--link" || strings.HasPrefix(s, "--link=") })
		}
		if (word == "RUN" || word == "COPY" || word == "ADD") && heredocMarker.MatchString(rest) {
			f.Heredoc = true
		}
	}
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			if directives {
				if m := syntaxDirective.FindStringSubmatch(trimmed); m != nil {
					f.Syntax = m[1]
					continue
				}
				if otherDirective.MatchString(trimmed) {
					continue
				}
			}
			directives = false
			continue
		}
		if trimmed == "" && ins.Len() == 0 {
			continue
		}
		directives = false
		if cont, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), "\\"); ok {
			ins.WriteString(cont + " ")
			continue
		}
		ins.WriteString(line)
		flush()
	}
	flush()
	return f
}

// instructionFlags are the leading --flags of an instruction's arguments.
func instructionFlags(args string) []string {
	var flags []string
	for _, w := range strings.Fields(args) {
		if !strings.HasPrefix(w, "--") {
			break
		}
		flags = append(flags, w)
	}
	return flags
}

// needBuildKit says whether the Dockerfile needs BuildKit. One that does
// not builds on the classic builder even where the engine has BuildKit:
// only the classic builder takes the session's memory and CPU limits.
func (f dockerfileFeatures) needBuildKit() bool {
	return f.Mount || f.Heredoc || f.Link || f.Syntax != ""
}

// ErrDockerfileFeature is returned when a Dockerfile uses a feature the
// engine's builder does not have.
var ErrDockerfileFeature = errors.New("the engine's builder cannot build this Dockerfile")

// check refuses what the builder b cannot build, and returns a notice
// for what the classic builder will fail on.
func (f dockerfileFeatures) check(b builderKind) (notice string, err error) {
	if f.Syntax != "" {
		return "", fmt.Errorf("%w: its \"# syntax=%s\" line asks for a Dockerfile frontend image, which the engine would have to pull, and a build pulls nothing on its own; remove the line to build with the engine's built-in frontend", ErrDockerfileFeature, f.Syntax)
	}
	var missing []string
	if f.Heredoc {
		missing = append(missing, "heredocs (<<EOF)")
	}
	if f.Link {
		missing = append(missing, "COPY --link")
	}
	if b.buildkit {
		if b.oldFrontend && len(missing) > 0 {
			return "", fmt.Errorf("%w: it uses %s, which the engine's built-in Dockerfile frontend (Docker 20.10) does not know; a newer engine (Docker 23 or later) builds them, or write the steps without them", ErrDockerfileFeature, strings.Join(missing, " and "))
		}
		return "", nil
	}
	if f.Mount {
		missing = append([]string{"RUN --mount"}, missing...)
	}
	if len(missing) == 0 {
		return "", nil
	}
	return fmt.Sprintf("the engine has no BuildKit, so the classic builder builds this Dockerfile, and its %s will fail", strings.Join(missing, " and ")), nil
}

// buildSession is a BuildKit session for one build: it serves the build
// the user's secrets and the registry credentials for FROM.
type buildSession struct {
	s    *session.Session
	done chan struct{}
}

// startBuildSession opens a session on the engine's /session endpoint
// with the secrets and the registry credentials of lookup (nil: the
// docker config file's).
func startBuildSession(ctx context.Context, api sessionAPI, secrets map[string][]byte, lookup CredentialLookup) (*buildSession, error) {
	s, err := session.NewSession(ctx, "shiro")
	if err != nil {
		return nil, fmt.Errorf("start build session: %w", err)
	}
	s.Allow(secretsprovider.FromMap(secrets))
	s.Allow(authProvider{lookup: orLookup(lookup)})
	bs := &buildSession{s: s, done: make(chan struct{})}
	go func() {
		defer close(bs.done)
		_ = s.Run(ctx, func(ctx context.Context, proto string, meta map[string][]string) (net.Conn, error) {
			return api.DialHijack(ctx, "/session", proto, meta)
		})
	}()
	return bs, nil
}

// id names the session in the build request.
func (b *buildSession) id() string { return b.s.ID() }

// close ends the session and waits for it.
func (b *buildSession) close() {
	_ = b.s.Close()
	<-b.done
}

// dockerHubHost is what BuildKit asks credentials for when it pulls from
// Docker Hub; the user's credentials for it are docker.io's, as the image
// reference writes it.
const dockerHubHost = "registry-1.docker.io"

// authProvider answers BuildKit's credential requests for the registries
// a build pulls from with the user's credentials (lookup). It offers no
// tokens of its own, so BuildKit falls back to credentials (the docker
// CLI's provider does the same for a plain config file).
type authProvider struct {
	auth.UnimplementedAuthServer
	lookup CredentialLookup
}

func (a authProvider) Register(s *grpc.Server) { auth.RegisterAuthServer(s, a) }

// Credentials gives the user and secret for req.Host (BuildKit asks for
// Docker Hub as registry-1.docker.io; its credentials are docker.io's):
// an identity token is a secret without a user. A host without
// credentials, or whose lookup failed (a missing credential helper), gets
// none: a public image needs none, and a refusal names the registry.
func (a authProvider) Credentials(ctx context.Context, req *auth.CredentialsRequest) (*auth.CredentialsResponse, error) {
	host := req.Host
	if host == dockerHubHost {
		host = "docker.io"
	}
	cred, _, err := a.lookup(ctx, host)
	if err != nil || cred.Empty() {
		return &auth.CredentialsResponse{}, nil
	}
	if cred.IdentityToken != "" {
		return &auth.CredentialsResponse{Secret: cred.IdentityToken}, nil
	}
	return &auth.CredentialsResponse{Username: cred.Username, Secret: cred.Password}, nil
}

// readBuildSecrets reads the values of the user's build secrets: an
// environment variable (lookup) or a file on the host.
func readBuildSecrets(list []sandbox.BuildSecret, lookup func(string) (string, bool)) (map[string][]byte, error) {
	m := map[string][]byte{}
	for _, s := range list {
		switch {
		case s.Env != "":
			v, ok := lookup(s.Env)
			if !ok {
				return nil, fmt.Errorf("build secret %s: environment variable %s is not set", s.ID, s.Env)
			}
			m[s.ID] = []byte(v)
		default:
			data, err := os.ReadFile(s.File)
			if err != nil {
				return nil, fmt.Errorf("build secret %s: %w", s.ID, err)
			}
			m[s.ID] = data
		}
	}
	return m, nil
}

// redactor replaces every secret value in a text by ****.
func redactor(secrets map[string][]byte) func(string) string {
	var values []string
	for _, v := range secrets {
		if s := strings.TrimSpace(string(v)); s != "" {
			values = append(values, s)
		}
	}
	if len(values) == 0 {
		return nil
	}
	// Longest first, so a value that holds another is replaced whole.
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	return func(s string) string {
		for _, v := range values {
			s = strings.ReplaceAll(s, v, "****")
		}
		return s
	}
}
