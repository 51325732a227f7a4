package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// devcontainer is what shiro takes from a devcontainer.json: the image or
// how to build it, and the environment. Everything that would run code on
// the host, widen the sandbox or run commands without the user's approval
// is left out, with a notice naming it.
type devcontainer struct {
	// Image is an image reference; empty when the file builds one.
	Image string
	// Dockerfile and Context are paths relative to the file's directory.
	Dockerfile string
	Context    string
	Args       map[string]*string
	Target     string
	// ContainerEnv and RemoteEnv become the sandbox's environment
	// (RemoteEnv wins; a null RemoteEnv value unsets the name). Values may
	// still hold ${containerEnv:NAME}, expanded once the image is known.
	ContainerEnv map[string]string
	RemoteEnv    map[string]*string
	// ComposeFiles (relative to the file's directory) and Service name
	// the Compose service a Compose devcontainer runs; Image and the
	// build are then the service's (see loadComposeService).
	ComposeFiles []string
	Service      string
	// ComposeEnv is the service's environment, under ContainerEnv.
	ComposeEnv map[string]string
	Notices    []string
}

// devcontainerJSON is the file's shape, for the fields shiro reads.
type devcontainerJSON struct {
	Image string `json:"image"`
	Build *struct {
		Dockerfile string            `json:"dockerfile"`
		Context    string            `json:"context"`
		Args       map[string]string `json:"args"`
		Target     string            `json:"target"`
	} `json:"build"`
	// The older top-level spelling of build.dockerfile and build.context.
	DockerFile        string             `json:"dockerFile"`
	Context           string             `json:"context"`
	ContainerEnv      map[string]string  `json:"containerEnv"`
	RemoteEnv         map[string]*string `json:"remoteEnv"`
	RemoteUser        string             `json:"remoteUser"`
	ContainerUser     string             `json:"containerUser"`
	DockerComposeFile json.RawMessage    `json:"dockerComposeFile"`
	Service           string             `json:"service"`
	RunServices       json.RawMessage    `json:"runServices"`
}

// devcontainerIgnored are the fields shiro refuses, with why. Each is named
// in a notice when the file sets it (to anything but null, false or empty).
var devcontainerIgnored = []struct{ key, why string }{
	{"initializeCommand", "it would run a command on your machine"},
	{"runArgs", "a repository cannot change how the sandbox container runs (docker run flags can add privileges, mounts or devices)"},
	{"mounts", "a repository cannot add mounts to the sandbox"},
	{"workspaceMount", "the workspace is always mounted at its own path"},
	{"workspaceFolder", "the workspace is at the same path in the sandbox as on your machine"},
	{"privileged", "the sandbox is never privileged"},
	{"capAdd", "the sandbox keeps no capabilities"},
	{"securityOpt", "the sandbox's security options are fixed"},
	{"appPort", "the sandbox publishes no ports"},
	{"features", "shiro builds only the image or Dockerfile; install what the features add in the Dockerfile"},
	{"onCreateCommand", "it would run without your approval; ask shiro to run it, or run it in `shiro sandbox shell`"},
	{"updateContentCommand", "it would run without your approval; ask shiro to run it, or run it in `shiro sandbox shell`"},
	{"postCreateCommand", "it would run without your approval; ask shiro to run it, or run it in `shiro sandbox shell`"},
	{"postStartCommand", "it would run without your approval; ask shiro to run it, or run it in `shiro sandbox shell`"},
	{"postAttachCommand", "it would run without your approval; ask shiro to run it, or run it in `shiro sandbox shell`"},
}

// maxDevcontainerSize bounds the file: a repository could point it at
// something huge.
const maxDevcontainerSize = 1 << 20

// parseDevcontainer reads a devcontainer.json (JSON with comments and
// trailing commas). file names it in messages; ws is the workspace path
// the ${localWorkspaceFolder} variables stand for.
func parseDevcontainer(data []byte, file, ws string) (*devcontainer, error) {
	if len(data) > maxDevcontainerSize {
		return nil, fmt.Errorf("%s: larger than %d KiB", file, maxDevcontainerSize>>10)
	}
	std, err := jsoncToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(std, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", file, describeJSONError(data, err))
	}
	var j devcontainerJSON
	if err := json.Unmarshal(std, &j); err != nil {
		return nil, fmt.Errorf("%s: %w", file, describeJSONError(data, err))
	}
	dc := &devcontainer{}
	note := func(format string, args ...any) {
		dc.Notices = append(dc.Notices, file+": "+fmt.Sprintf(format, args...))
	}
	for _, ig := range devcontainerIgnored {
		if v, ok := raw[ig.key]; ok && meaningful(v) {
			verb := "is ignored"
			if strings.HasSuffix(ig.key, "Command") {
				verb = "is not run"
			} else if ig.key == "features" {
				verb = "are not installed"
			}
			note("%q %s: %s", ig.key, verb, ig.why)
		}
	}
	for _, u := range []struct{ key, name string }{{"remoteUser", j.RemoteUser}, {"containerUser", j.ContainerUser}} {
		if u.name != "" {
			note("%q %q is not used: commands run as your own uid and gid, so the files they write in the workspace are yours (HOME is %s)", u.key, u.name, homeDir)
		}
	}
	x := &expander{ws: ws, file: file, note: note}
	if meaningful(j.DockerComposeFile) {
		if err := dc.composeFields(j, x, note); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	dc.Image = x.expand("image", j.Image)
	dc.Dockerfile, dc.Context = j.DockerFile, j.Context
	if b := j.Build; b != nil {
		if b.Dockerfile != "" {
			dc.Dockerfile = b.Dockerfile
		}
		if b.Context != "" {
			dc.Context = b.Context
		}
		dc.Target = x.expand("build.target", b.Target)
		if len(b.Args) > 0 {
			dc.Args = make(map[string]*string, len(b.Args))
			for _, k := range slices.Sorted(maps.Keys(b.Args)) {
				v := x.expandStrict("build.args."+k, b.Args[k])
				dc.Args[k] = &v
			}
		}
		var build map[string]json.RawMessage
		if v, ok := raw["build"]; ok && json.Unmarshal(v, &build) == nil {
			if o, ok := build["options"]; ok && meaningful(o) {
				note(`"build.options" is ignored: a repository cannot pass flags to the build`)
			}
		}
	}
	dc.Dockerfile = x.expand("build.dockerfile", dc.Dockerfile)
	dc.Context = x.expand("build.context", dc.Context)
	switch {
	case dc.Service != "":
		// The Compose service gives the image or the build.
		if dc.Image != "" || dc.Dockerfile != "" {
			note(`"image" and "build" are ignored: the Compose service %q gives the image`, dc.Service)
		}
		dc.Image, dc.Dockerfile, dc.Context, dc.Args, dc.Target = "", "", "", nil, ""
	case dc.Image != "" && dc.Dockerfile != "":
		note(`"image" is ignored: "build.dockerfile" is set too, and the image is built from it`)
		dc.Image = ""
	case dc.Image == "" && dc.Dockerfile == "":
		return nil, fmt.Errorf(`%s: names neither "image" nor "build.dockerfile"`, file)
	}
	if dc.Context == "" && dc.Service == "" {
		dc.Context = "."
	}
	for _, k := range slices.Sorted(maps.Keys(j.ContainerEnv)) {
		if err := checkEnvName(k); err != nil {
			return nil, fmt.Errorf("%s: containerEnv: %w", file, err)
		}
		if dc.ContainerEnv == nil {
			dc.ContainerEnv = map[string]string{}
		}
		dc.ContainerEnv[k] = x.expand("containerEnv."+k, j.ContainerEnv[k])
	}
	for _, k := range slices.Sorted(maps.Keys(j.RemoteEnv)) {
		if err := checkEnvName(k); err != nil {
			return nil, fmt.Errorf("%s: remoteEnv: %w", file, err)
		}
		if dc.RemoteEnv == nil {
			dc.RemoteEnv = map[string]*string{}
		}
		var v *string
		if j.RemoteEnv[k] != nil {
			s := x.expand("remoteEnv."+k, *j.RemoteEnv[k])
			v = &s
		}
		dc.RemoteEnv[k] = v
	}
	if x.err != nil {
		return nil, fmt.Errorf("%s: %w", file, x.err)
	}
	return dc, nil
}

// loadCompose takes the image or build and the environment of a Compose
// devcontainer's service, read from the Compose files beside file (read
// through loc, which file, when it is in the workspace, confines to it).
// It does nothing for other devcontainers.
func (dc *devcontainer) loadCompose(ctx context.Context, loc *locator, file place) error {
	if dc.Service == "" {
		return nil
	}
	// The file's own paths are the repository's choice when the file is in
	// the workspace: they may not leave it.
	if file.inside {
		loc.trusted = false
	}
	shown := func(abs string) string {
		if rel, err := filepath.Rel(loc.ws, abs); err == nil && filepath.IsLocal(rel) {
			return rel
		}
		return abs
	}
	cs, err := loadComposeService(ctx, loc, file.dir(), dc.ComposeFiles, dc.Service, shown)
	if err != nil {
		return fmt.Errorf("%s: %w", shown(file.abs), err)
	}
	dc.Notices = append(dc.Notices, cs.Notices...)
	dc.Image, dc.Dockerfile, dc.Context, dc.Args, dc.Target = cs.Image, cs.Dockerfile, cs.Context, cs.Args, cs.Target
	dc.ComposeEnv = cs.Env
	return nil
}

// composeFields takes dockerComposeFile (a path or a list of them),
// service and runServices.
func (dc *devcontainer) composeFields(j devcontainerJSON, x *expander, note func(string, ...any)) error {
	var one string
	var list []string
	if json.Unmarshal(j.DockerComposeFile, &one) == nil {
		list = []string{one}
	} else if err := json.Unmarshal(j.DockerComposeFile, &list); err != nil {
		return errors.New(`"dockerComposeFile" must be a string or an array of strings`)
	}
	for i, f := range list {
		if f = x.expand(fmt.Sprintf("dockerComposeFile[%d]", i), f); f == "" {
			return errors.New(`"dockerComposeFile" holds an empty path`)
		}
		dc.ComposeFiles = append(dc.ComposeFiles, f)
	}
	if dc.Service = x.expand("service", j.Service); dc.Service == "" {
		return errors.New(`"dockerComposeFile" is set but "service" is not: name the Compose service shiro runs as its sandbox`)
	}
	if meaningful(j.RunServices) {
		note(`"runServices" is ignored: shiro runs only the %q service's image, as its sandbox; running the other services of a Compose file is not supported`, dc.Service)
	}
	return nil
}

// env returns the environment entries the file asks for, with
// ${containerEnv:NAME} taken from the image's environment.
func (dc *devcontainer) env(imageEnv []string) []string {
	base := map[string]string{}
	for _, kv := range imageEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			base[k] = v
		}
	}
	final := map[string]*string{}
	for k, v := range dc.ComposeEnv {
		final[k] = &v
	}
	for k, v := range dc.ContainerEnv {
		s := expandContainerEnv(v, base)
		final[k] = &s
	}
	// remoteEnv may refer to what containerEnv set.
	withContainer := maps.Clone(base)
	for k, v := range final {
		withContainer[k] = *v
	}
	for k, v := range dc.RemoteEnv {
		if v == nil {
			final[k] = nil
			continue
		}
		s := expandContainerEnv(*v, withContainer)
		final[k] = &s
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(final)) {
		if final[k] != nil {
			out = append(out, k+"="+*final[k])
		}
	}
	return out
}

// meaningful reports whether a JSON value is set to something: not null,
// false, "", [] or {}.
func meaningful(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "false", `""`, "[]", "{}":
		return false
	}
	var v any
	if json.Unmarshal(raw, &v) == nil {
		switch v := v.(type) {
		case []any:
			return len(v) > 0
		case map[string]any:
			return len(v) > 0
		}
	}
	return true
}

func checkEnvName(k string) error {
	if k == "" || strings.ContainsAny(k, "= \t\r\n\x00") {
		return fmt.Errorf("%q is not a variable name", k)
	}
	return nil
}

// describeJSONError adds the line and column to a syntax error.
func describeJSONError(src []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := offsetPosition(src, int(se.Offset)-1)
		return fmt.Errorf("line %d, column %d: %v", line, col, se)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%q must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	return err
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "map", "struct", "ptr":
		return "an object"
	case "slice":
		return "an array"
	}
	return goKind
}

// variable matches the devcontainer variables: ${name} or ${name:arg...}.
var variable = regexp.MustCompile(`\$\{([A-Za-z]+)(?::([^}]*))?\}`)

// expander replaces the devcontainer variables shiro can stand for.
// ${localEnv:NAME} is never expanded: a repository must not read the host's
// environment into the image or the sandbox (its default, if it has one,
// is used, and a notice says so). ${containerEnv:...} is left for env.
type expander struct {
	ws   string
	file string
	note func(format string, args ...any)
	// err is the first variable refused.
	err error
}

// expand replaces the variables of s, the value of key. A template's
// ${templateOption:...} placeholder is refused; other variables shiro does
// not know are left as they are.
func (x *expander) expand(key, s string) string { return x.expandVars(key, s, false) }

// expandStrict is expand for the values that go to the build (build.args):
// a variable shiro does not know is refused too, rather than passed on.
func (x *expander) expandStrict(key, s string) string { return x.expandVars(key, s, true) }

func (x *expander) fail(err error) {
	if x.err == nil {
		x.err = err
	}
}

func (x *expander) expandVars(key, s string, strict bool) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return variable.ReplaceAllStringFunc(s, func(m string) string {
		sub := variable.FindStringSubmatch(m)
		name, arg := sub[1], sub[2]
		switch name {
		case "localWorkspaceFolder", "containerWorkspaceFolder":
			return x.ws
		case "localWorkspaceFolderBasename", "containerWorkspaceFolderBasename":
			return filepath.Base(x.ws)
		case "devcontainerId":
			return workspaceKey(x.ws)
		case "localEnv", "env":
			v, def, _ := strings.Cut(arg, ":")
			x.note("%q: ${%s:%s} is not expanded: a repository cannot read your environment (pass it into the sandbox with --env %s)", key, name, v, v)
			return def
		case "templateOption":
			x.fail(fmt.Errorf("%q: %s is a template placeholder: the file is a copy of a devcontainer template whose options were never filled in; replace it with a value", key, m))
			return m
		}
		if strict {
			x.fail(fmt.Errorf("%q: unknown variable %s", key, m))
		}
		return m
	})
}

// expandContainerEnv replaces ${containerEnv:NAME[:default]} with the value
// from env.
func expandContainerEnv(s string, env map[string]string) string {
	if !strings.Contains(s, "${containerEnv:") {
		return s
	}
	return variable.ReplaceAllStringFunc(s, func(m string) string {
		sub := variable.FindStringSubmatch(m)
		if sub[1] != "containerEnv" {
			return m
		}
		name, def, _ := strings.Cut(sub[2], ":")
		if v, ok := env[name]; ok {
			return v
		}
		return def
	})
}
