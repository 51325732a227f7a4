package docker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/compose-spec/compose-go/v2/consts"
	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v4"
)

// A Compose devcontainer names a service of one or more Compose files:
// shiro takes that service's image or build, and its environment, and
// runs nothing else of the files.
//
// compose-go reads the files a Compose file names itself (extends,
// include, the .env of an included project), by path. So that it cannot
// read anything of the host, it is only ever given paths inside a private
// staging directory, where shiro puts copies of the files it read through
// the confined reader (the workspace's os.Root): the staging directory
// mirrors the host's absolute paths under root/, and a path that leads out
// of it is turned back into the host path it stands for and checked like
// every other path a devcontainer.json names. env_file and the project's
// .env are read by shiro itself, through the same reader. Interpolation
// takes its variables only from the project's .env: an unset ${VAR} is an
// error naming it, unless the file gives a default.

const (
	// maxComposeFile bounds each file Compose reads.
	maxComposeFile = 1 << 20
	// maxComposeReads bounds the files one devcontainer's Compose files
	// may lead to (compose files, extends, include, env files).
	maxComposeReads = 64
)

// composeService is what shiro takes from the named service.
type composeService struct {
	Image string
	// Dockerfile and Context are absolute host paths, for a build.
	Dockerfile, Context string
	Args                map[string]*string
	Target              string
	// Env is the service's environment, env_file entries included.
	Env     map[string]string
	Notices []string
}

// UnsetVariableError is a ${NAME} in a Compose file that nothing sets.
type UnsetVariableError struct{ Name string }

func (e *UnsetVariableError) Error() string {
	return fmt.Sprintf("variable ${%s} is not set: a devcontainer's Compose files take variables only from the project's .env file, never from your environment (give it a default: ${%s:-value})", e.Name, e.Name)
}

// quietLogrus stops compose-go's warnings (written with logrus to stderr)
// from breaking into the terminal: what matters of them shiro says itself.
var quietLogrus sync.Once

// composeFiles reads the files of one Compose devcontainer.
type composeFiles struct {
	loc *locator
	// stage is the private directory compose-go reads its copies from.
	stage string
	// top holds the staged paths of the top-level Compose files; their
	// relative paths are relative to projectDir (staged), as in Compose.
	top        map[string]bool
	projectDir string
	// last is the path the last Load was asked for and its staged copy:
	// compose-go asks Dir for the same path right after.
	last  struct{ raw, staged string }
	reads int
	// shown names a host path in messages.
	shown func(abs string) string
}

func (c *composeFiles) root() string { return filepath.Join(c.stage, "root") }

// staged is where the copy of the host file abs goes.
func (c *composeFiles) staged(abs string) string { return filepath.Join(c.root(), abs) }

// host turns a path compose-go holds back into the host path it stands
// for: a staged copy's path, or a path the file named itself.
func (c *composeFiles) host(p string) (string, error) {
	p = filepath.Clean(p)
	if rel, err := filepath.Rel(c.root(), p); err == nil && (rel == "." || filepath.IsLocal(rel)) {
		return filepath.Join(string(filepath.Separator), rel), nil
	}
	if rel, err := filepath.Rel(c.stage, p); err == nil && (rel == "." || filepath.IsLocal(rel)) {
		// A relative path climbed out of the mirror: above the root.
		return "", fmt.Errorf("a path that climbs above / is %w", ErrOutsideWorkspace)
	}
	return p, nil
}

// place checks a path compose-go holds: inside the workspace (or, for a
// devcontainer.json of your own outside it, anywhere you can read).
func (c *composeFiles) place(p string) (place, error) {
	h, err := c.host(p)
	if err != nil {
		return place{}, err
	}
	return c.loc.place(h, string(filepath.Separator))
}

// exists reports whether pl is there (a link, a FIFO: there, and refused
// when read).
func (c *composeFiles) exists(pl place) bool {
	var err error
	if pl.inside {
		_, err = c.loc.root.Lstat(filepath.FromSlash(pl.rel))
	} else {
		_, err = os.Lstat(pl.abs)
	}
	return !errors.Is(err, fs.ErrNotExist)
}

// read reads a file through the confined reader.
func (c *composeFiles) read(pl place) ([]byte, error) {
	if c.reads++; c.reads > maxComposeReads {
		return nil, fmt.Errorf("more than %d files to read", maxComposeReads)
	}
	data, err := c.loc.readFile(pl, maxComposeFile+1)
	if err != nil {
		return nil, err
	}
	if len(data) > maxComposeFile {
		return nil, fmt.Errorf("%s: larger than %d KiB", c.shown(pl.abs), maxComposeFile>>10)
	}
	return data, nil
}

// put writes a copy into the staging directory.
func (c *composeFiles) put(pl place, data []byte) (string, error) {
	dst := c.staged(pl.abs)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		return "", err
	}
	return dst, nil
}

// stageCompose reads a Compose file and puts its copy, and the .env beside
// it (an included project's variables), in the staging directory.
func (c *composeFiles) stageCompose(pl place) (string, []byte, error) {
	data, err := c.read(pl)
	if err != nil {
		return "", nil, err
	}
	if err := checkIncludes(data); err != nil {
		return "", nil, fmt.Errorf("%s: %w", c.shown(pl.abs), err)
	}
	dst, err := c.put(pl, data)
	if err != nil {
		return "", nil, err
	}
	env := pl.dir().join(".env")
	if c.exists(env) {
		envData, err := c.read(env)
		if err != nil {
			return "", nil, err
		}
		if _, err := c.put(env, envData); err != nil {
			return "", nil, err
		}
	}
	return dst, data, nil
}

// Accept takes every path: no file goes to compose-go's own loader.
func (c *composeFiles) Accept(string) bool { return true }

// Load reads the file p names (extends.file, include) through the confined
// reader and returns its staged copy.
func (c *composeFiles) Load(ctx context.Context, p string) (string, error) {
	full := p
	if !filepath.IsAbs(p) && !strings.HasPrefix(p, "~") {
		base := c.projectDir
		if cur, _ := ctx.Value(consts.ComposeFileKey{}).(string); cur != "" && !c.top[cur] {
			base = filepath.Dir(cur)
		}
		full = filepath.Join(base, p)
	}
	var pl place
	var err error
	if strings.HasPrefix(p, "~") {
		pl, err = c.loc.place(p, string(filepath.Separator))
	} else {
		pl, err = c.place(full)
	}
	if err != nil {
		return "", fmt.Errorf("%q: %w", p, err)
	}
	dst, _, err := c.stageCompose(pl)
	if err != nil {
		return "", err
	}
	c.last.raw, c.last.staged = p, dst
	return dst, nil
}

// Dir is the directory of a file Load returned, or was just asked for.
func (c *composeFiles) Dir(p string) string {
	if p == c.last.raw {
		return filepath.Dir(c.last.staged)
	}
	if filepath.IsAbs(p) {
		return filepath.Dir(p)
	}
	return filepath.Dir(filepath.Join(c.projectDir, p))
}

// checkIncludes refuses the include entries compose-go would resolve by
// itself, with the host's file system: env_file and project_directory.
func checkIncludes(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return nil // compose-go says what is wrong with it
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		top := doc.Content[0].Content
		for i := 0; i+1 < len(top); i += 2 {
			if top[i].Value != "include" || top[i+1].Kind != yaml.SequenceNode {
				continue
			}
			for _, entry := range top[i+1].Content {
				if entry.Kind != yaml.MappingNode {
					continue
				}
				for j := 0; j+1 < len(entry.Content); j += 2 {
					if k := entry.Content[j].Value; k == "env_file" || k == "project_directory" {
						return fmt.Errorf("line %d: \"include\" with %q is not supported: include the file by its path, with its .env beside it", entry.Content[j].Line, k)
					}
				}
			}
		}
	}
}

// loadComposeService reads the devcontainer's Compose files (paths
// relative to the devcontainer.json's directory dir) and takes the
// service from them.
func loadComposeService(ctx context.Context, loc *locator, dir place, files []string, service string, shown func(string) string) (*composeService, error) {
	quietLogrus.Do(func() { logrus.SetOutput(io.Discard) })
	stage, err := os.MkdirTemp("", "shiro-compose-")
	if err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	defer os.RemoveAll(stage)
	c := &composeFiles{loc: loc, stage: stage, top: map[string]bool{}, shown: shown}

	var configs []types.ConfigFile
	var topPlaces []place
	for i, f := range files {
		pl, err := loc.place(f, dir.abs)
		if err != nil {
			return nil, fmt.Errorf("dockerComposeFile: %w", err)
		}
		dst, data, err := c.stageCompose(pl)
		if err != nil {
			return nil, fmt.Errorf("dockerComposeFile: %w", err)
		}
		if i == 0 {
			c.projectDir = filepath.Dir(dst)
		}
		c.top[dst] = true
		configs = append(configs, types.ConfigFile{Filename: dst, Content: data})
		topPlaces = append(topPlaces, pl)
	}

	// The project's .env: the only source of the files' variables.
	env := types.Mapping{}
	if dotEnv := topPlaces[0].dir().join(".env"); c.exists(dotEnv) {
		data, err := c.read(dotEnv)
		if err != nil {
			return nil, err
		}
		vars, err := dotenv.ParseWithLookup(bytes.NewReader(data), noLookup)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shown(dotEnv.abs), err)
		}
		maps.Copy(env, vars)
	}
	details := types.ConfigDetails{WorkingDir: c.projectDir, ConfigFiles: configs, Environment: env}
	options := func(o *loader.Options) {
		o.SetProjectName("devcontainer", true)
		o.SkipNormalization = true // done below, once the service's own keys are known
		o.SkipResolveEnvironment = true
		o.SkipResolveLabels = true
		o.ResourceLoaders = []loader.ResourceLoader{c}
		if o.Interpolate != nil {
			o.Interpolate.Substitute = strictSubstitute
			o.Interpolate.LookupValue = func(k string) (string, bool) { v, ok := details.Environment[k]; return v, ok }
		}
	}
	model, err := loader.LoadModelWithContext(ctx, details, options)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown(topPlaces[0].abs), c.unstage(err))
	}
	cs := &composeService{}
	first := shown(topPlaces[0].abs)
	note := func(format string, args ...any) {
		cs.Notices = append(cs.Notices, first+": "+fmt.Sprintf(format, args...))
	}
	services, _ := model["services"].(map[string]any)
	raw, ok := services[service].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: the Compose files have no service %q (they have %s)", first, service, quoteList(slices.Sorted(maps.Keys(services))))
	}
	noteIgnoredService(note, service, raw)
	if others := slices.DeleteFunc(slices.Sorted(maps.Keys(services)), func(s string) bool { return s == service }); len(others) > 0 {
		note("services %s are not started: shiro runs only the %q service's image, as its sandbox; running the other services of a Compose file is not supported", quoteList(others), service)
	}
	if model, err = loader.Normalize(model, details.Environment); err != nil {
		return nil, fmt.Errorf("%s: %w", first, c.unstage(err))
	}
	project, err := loader.ModelToProject(model, loader.ToOptions(&details, []func(*loader.Options){options}), details)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", first, c.unstage(err))
	}
	svc, ok := project.Services[service]
	if !ok {
		svc, ok = project.DisabledServices[service]
	}
	if !ok {
		return nil, fmt.Errorf("%s: no service %q", first, service)
	}
	key := "services." + service
	if svc.User != "" {
		note("%q %q is not used: commands run as your own uid and gid, so the files they write in the workspace are yours (HOME is %s)", key+".user", svc.User, homeDir)
	}
	if svc.WorkingDir != "" {
		note("%q %q is not used: commands run in the workspace, at the same path as on your machine", key+".working_dir", svc.WorkingDir)
	}
	if err := c.takeBuild(cs, svc, key, note); err != nil {
		return nil, fmt.Errorf("%s: %w", first, err)
	}
	if cs.Image == "" && cs.Dockerfile == "" {
		return nil, fmt.Errorf("%s: service %q has neither \"image\" nor \"build\"", first, service)
	}
	if cs.Env, err = c.takeEnv(svc, key, note); err != nil {
		return nil, fmt.Errorf("%s: %w", first, err)
	}
	return cs, nil
}

// takeBuild takes the service's image or build.
func (c *composeFiles) takeBuild(cs *composeService, svc types.ServiceConfig, key string, note func(string, ...any)) error {
	b := svc.Build
	if b == nil {
		cs.Image = svc.Image
		return nil
	}
	if b.DockerfileInline != "" {
		return fmt.Errorf("%q is not supported: put the Dockerfile in a file of the workspace", key+".build.dockerfile_inline")
	}
	if strings.Contains(b.Context, "://") || strings.HasPrefix(b.Context, "git@") || strings.HasPrefix(b.Context, "github.com/") {
		return fmt.Errorf("%q %q: a build context that is not a directory of the workspace is not supported", key+".build.context", b.Context)
	}
	cdir, err := c.place(b.Context)
	if err != nil {
		return fmt.Errorf("%q: %w", key+".build.context", err)
	}
	df := b.Dockerfile
	if !filepath.IsAbs(df) {
		df = filepath.Join(cdir.abs, df)
	}
	dfp, err := c.place(df)
	if err != nil {
		return fmt.Errorf("%q: %w", key+".build.dockerfile", err)
	}
	cs.Context, cs.Dockerfile, cs.Target = cdir.abs, dfp.abs, b.Target
	for _, k := range slices.Sorted(maps.Keys(b.Args)) {
		if b.Args[k] == nil {
			continue // no value: the Dockerfile's default
		}
		if cs.Args == nil {
			cs.Args = map[string]*string{}
		}
		v := *b.Args[k]
		cs.Args[k] = &v
	}
	return nil
}

// takeEnv is the service's environment: its env_file entries, read through
// the confined reader, then environment over them.
func (c *composeFiles) takeEnv(svc types.ServiceConfig, key string, note func(string, ...any)) (map[string]string, error) {
	env := map[string]string{}
	for _, ef := range svc.EnvFiles {
		pl, err := c.place(ef.Path)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", key+".env_file", err)
		}
		if !bool(ef.Required) && !c.exists(pl) {
			continue
		}
		data, err := c.read(pl)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", key+".env_file", err)
		}
		vars, err := parseEnvFile(data, ef.Format, env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.shown(pl.abs), err)
		}
		maps.Copy(env, vars)
	}
	for _, k := range slices.Sorted(maps.Keys(svc.Environment)) {
		if err := checkEnvName(k); err != nil {
			return nil, fmt.Errorf("%q: %w", key+".environment", err)
		}
		v := svc.Environment[k]
		if v == nil {
			note("%q has no value: Compose would take it from your environment, which a repository cannot read (pass it into the sandbox with --env %s)", key+".environment."+k, k)
			continue
		}
		env[k] = *v
	}
	for k := range env {
		if err := checkEnvName(k); err != nil {
			return nil, fmt.Errorf("%q: %w", key+".env_file", err)
		}
	}
	return env, nil
}

// parseEnvFile reads an env_file: dotenv syntax, or "raw" (NAME=value
// lines taken as they are). Variables refer only to the file itself and
// to the entries before it.
func parseEnvFile(data []byte, format string, before map[string]string) (map[string]string, error) {
	switch format {
	case "":
		return dotenv.ParseWithLookup(bytes.NewReader(data), func(k string) (string, bool) {
			v, ok := before[k]
			return v, ok
		})
	case "raw":
		vars := map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, maxComposeFile)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, _ := strings.Cut(line, "=")
			vars[k] = v
		}
		return vars, sc.Err()
	}
	return nil, fmt.Errorf("env_file format %q is not supported", format)
}

func noLookup(string) (string, bool) { return "", false }

// strictSubstitute interpolates like Compose, except that a variable that
// is unset and has no default is an error naming it.
func strictSubstitute(tmpl string, mapping template.Mapping) (string, error) {
	var missing string
	m := func(k string) (string, bool) {
		v, ok := mapping(k)
		if !ok {
			missing = k
		}
		return v, ok
	}
	return template.SubstituteWithOptions(tmpl, m, template.WithoutLogging,
		template.WithReplacementFunction(func(s string, mp template.Mapping, cfg *template.Config) (string, error) {
			missing = ""
			v, applied, err := template.DefaultReplacementAppliedFunc(s, mp, cfg)
			if err == nil && !applied && missing != "" {
				return "", &UnsetVariableError{Name: missing}
			}
			return v, err
		}))
}

// unstage puts host paths back in an error of compose-go's that names
// staged copies.
func (c *composeFiles) unstage(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, c.root()) {
		return err
	}
	return &unstagedError{msg: strings.ReplaceAll(msg, c.root(), ""), err: err}
}

type unstagedError struct {
	msg string
	err error
}

func (e *unstagedError) Error() string { return e.msg }
func (e *unstagedError) Unwrap() error { return e.err }

// serviceIgnored says why a key of the service is not used. Keys not
// listed, and not taken, get the generic reason.
var serviceIgnored = map[string]string{
	"ports":        "the sandbox publishes no ports",
	"expose":       "the sandbox publishes no ports",
	"volumes":      "a repository cannot add mounts to the sandbox (the workspace is always mounted at its own path)",
	"volumes_from": "a repository cannot add mounts to the sandbox",
	"tmpfs":        "a repository cannot add mounts to the sandbox",
	"privileged":   "the sandbox is never privileged",
	"cap_add":      "the sandbox keeps no capabilities",
	"security_opt": "the sandbox's security options are fixed",
	"devices":      "a repository cannot add devices to the sandbox",
	"network_mode": "the sandbox's network is shiro's (through its egress proxy)",
	"networks":     "the sandbox's network is shiro's (through its egress proxy)",
	"extra_hosts":  "the sandbox's network is shiro's (through its egress proxy)",
	"dns":          "the sandbox's network is shiro's (through its egress proxy)",
	"pid":          "the sandbox has its own process namespace",
	"ipc":          "the sandbox has its own IPC namespace",
	"userns_mode":  "the sandbox's user namespace is fixed",
	"command":      "the sandbox runs shiro's own init",
	"entrypoint":   "the sandbox runs shiro's own init",
	"depends_on":   "running the other services of a Compose file is not supported",
	"links":        "running the other services of a Compose file is not supported",
	"secrets":      "a repository cannot give the sandbox secrets (build secrets are your own: --build-secret)",
	"configs":      "a repository cannot add files to the sandbox",
}

// serviceTaken are the keys shiro uses, or explains apart.
var serviceTaken = []string{"image", "build", "environment", "env_file", "user", "working_dir",
	// What changes nothing in the sandbox.
	"container_name", "hostname", "labels", "label_file", "init", "tty", "stdin_open", "restart", "healthcheck", "logging", "pull_policy"}

// buildTaken are the build keys shiro uses.
var buildTaken = []string{"context", "dockerfile", "dockerfile_inline", "args", "target", "labels", "tags"}

func noteIgnoredService(note func(string, ...any), service string, raw map[string]any) {
	key := "services." + service
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if slices.Contains(serviceTaken, k) || !meaningfulValue(raw[k]) {
			continue
		}
		why, ok := serviceIgnored[k]
		if !ok {
			why = "shiro takes only the service's image or build and its environment"
		}
		note("%q is ignored: %s", key+"."+k, why)
	}
	if b, ok := raw["build"].(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(b)) {
			if slices.Contains(buildTaken, k) || !meaningfulValue(b[k]) {
				continue
			}
			note("%q is ignored: a repository cannot pass options to the build", key+".build."+k)
		}
	}
}

// meaningfulValue reports whether a Compose value is set to something.
func meaningfulValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
