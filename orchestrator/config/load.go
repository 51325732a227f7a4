package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// LoadOptions are the sources Load reads.
type LoadOptions struct {
	// Paths locate the user's file; an empty ConfigDir means none.
	Paths Paths
	// Workspace is the absolute workspace directory; its
	// .shiro/config.json is the project file. Empty means none.
	Workspace string
	// Env reads the environment; nil means os.LookupEnv.
	Env func(string) (string, bool)
	// Flags are the command line's settings.
	Flags Overrides
	// KnownToolSets are the tool set names the tools package knows; other
	// names in toolSets are dropped with a notice. Nil keeps every name.
	KnownToolSets []string
}

// projectFileName is how the project file is named in messages.
var projectFileName = filepath.Join(".shiro", "config.json")

// maxFileSize bounds a config file: a project could point it at something
// huge.
const maxFileSize = 1 << 20

// Load resolves the configuration: flags > environment > project file >
// user file > defaults. Notices are warnings (unknown keys, refused project
// settings, unknown tool sets); an error means shiro should not start
// (unreadable or malformed files, wrong types, invalid values).
func Load(opts LoadOptions) (Config, []Notice, error) {
	getenv := opts.Env
	if getenv == nil {
		getenv = os.LookupEnv
	}
	env, err := envLayer(getenv)
	if err != nil {
		return Config{}, nil, err
	}
	flags, err := flagLayer(&opts.Flags)
	if err != nil {
		return Config{}, nil, err
	}
	m := merger{known: opts.KnownToolSets}

	var userFile string
	var data []byte
	if opts.Paths.ConfigDir != "" {
		userFile = opts.Paths.ConfigFile()
		if data, err = readUserFile(userFile); err != nil {
			return Config{}, nil, err
		}
	}
	user, notices, err := parseFile(data, userFile)
	if err != nil {
		return Config{}, nil, err
	}
	m.notices = notices
	m.user(user, userFile)

	if opts.Workspace != "" && filepath.Clean(ProjectConfigFile(opts.Workspace)) != filepath.Clean(userFile) {
		data, notice, err := readProjectFile(opts.Workspace)
		if err != nil {
			return Config{}, nil, err
		}
		if notice != nil {
			m.notices = append(m.notices, *notice)
		}
		proj, notices, err := parseFile(data, projectFileName)
		if err != nil {
			return Config{}, nil, err
		}
		m.notices = append(m.notices, notices...)
		m.project(proj, env.Provider != nil || flags.Provider != nil, flags.Network != nil)
	}

	m.overlay(env)
	m.toolSets(flags, "command line")
	m.overlay(flags)
	for _, h := range opts.Flags.AllowHosts {
		c, err := egress.ParsePattern(h)
		if err != nil {
			return Config{}, nil, &Error{Key: "--allow-host", Err: err}
		}
		m.net.Allow = append(m.net.Allow, HostRule{Pattern: c, Source: "--allow-host"})
	}
	if flags.Image != nil {
		m.imageFromProject = false
	}
	return m.finish(getenv), m.notices, nil
}

// readUserFile reads the user's file; a missing file is an empty one.
func readUserFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	return readCapped(f, name)
}

// readProjectFile reads <workspace>/.shiro/config.json through an os.Root
// of the workspace: a symlink is followed only while it stays inside, and
// only a regular file is read (opened without blocking: a FIFO would stall
// start-up). A missing file is an empty one; one that is refused is
// skipped with a notice that says why.
func readProjectFile(workspace string) ([]byte, *Notice, error) {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, nil, fmt.Errorf("read project config: %w", err)
	}
	defer root.Close()
	tree := confine.Tree{Root: root, Name: "the workspace"}
	f, err := tree.Open(filepath.ToSlash(projectFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if r, ok := confine.AsRefusal(err); ok {
		return nil, &Notice{File: projectFileName, Message: "ignored: it is " + r.Reason}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read project config: %w", err)
	}
	defer f.Close()
	data, err := readCapped(f, projectFileName)
	return data, nil, err
}

func readCapped(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxFileSize {
		return nil, &Error{File: name, Err: fmt.Errorf("larger than %d KiB", maxFileSize>>10)}
	}
	return data, nil
}

// layer is what one source sets; nil means not set.
type layer struct {
	Provider, Model, BaseURL, APIKey, Thinking, Agent *string
	OpenAIAPI                                         *string
	MaxRetries, CompactThreshold                      *int
	ToolSets, Plugins                                 *[]string
	Yolo                                              *bool
	Image, Network, Memory                            *string
	CPUs                                              *float64
	Pids                                              *int64
	Env                                               *[]string
	NoSandbox                                         *bool
	MCPServers                                        map[string]json.RawMessage
	NetAllow, NetDeny                                 *[]string
	NetCreds                                          *[]Credential // network.credentials, user file only
	// TrustPaths is trust.paths: workspaces (paths or glob patterns) whose
	// project asks need no question. User file only.
	TrustPaths *[]string
}

// The keys a file may hold.
var (
	topKeys     = []string{"provider", "model", "baseURL", "apiKey", "maxRetries", "toolSets", "plugins", "yolo", "agent", "thinking", "sandbox", "mcpServers", "compactThreshold", "openaiAPI", "trust", "network"}
	sandboxKeys = []string{"image", "network", "memory", "cpus", "pids", "env", "noSandbox"}
	trustKeys   = []string{"paths"}
)

// checkSyntax reports a JSON syntax error with its line and column.
func checkSyntax(data []byte, file string) error {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return nil // other errors cannot happen decoding into any
	}
	off := se.Offset
	if off > 0 && se.Error() != "unexpected end of JSON input" {
		off-- // the offending byte; at the end of input, point past it
	}
	line, col := position(data, off)
	return &Error{File: file, Line: line, Column: col, Err: fmt.Errorf("not valid JSON: %s", se.Error())}
}

// position turns a byte offset into a 1-based line and column (in
// characters).
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, 1 + utf8.RuneCount(before[start:])
}

// member is one key of a JSON object and where its value starts.
type member struct {
	key string
	raw json.RawMessage
	off int64
}

// parser reads one file.
type parser struct {
	data    []byte
	file    string
	notices []Notice
}

// parseFile reads a config file's content: syntax, types, values and
// unknown keys. Empty content is an empty configuration.
func parseFile(data []byte, file string) (*layer, []Notice, error) {
	l := &layer{}
	if len(bytes.TrimSpace(data)) == 0 {
		return l, nil, nil
	}
	if err := checkSyntax(data, file); err != nil {
		return nil, nil, err
	}
	p := &parser{data: data, file: file}
	members, err := p.object(member{raw: data, off: 0}, "")
	if err != nil {
		return nil, nil, err
	}
	for _, m := range members {
		if err := p.top(l, m); err != nil {
			return nil, nil, err
		}
	}
	return l, p.notices, nil
}

// object splits an object value into its members; path names it in errors
// ("" for the whole file).
func (p *parser) object(v member, path string) ([]member, error) {
	raw := bytes.TrimLeft(v.raw, " \t\r\n")
	base := v.off + int64(len(v.raw)-len(raw))
	if len(raw) == 0 || raw[0] != '{' {
		if path == "" {
			return nil, p.errorAt(base, "", errors.New("want a JSON object"))
		}
		return nil, p.errorAt(base, path, fmt.Errorf("%q must be an object, not %s", path, kindOf(raw)))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, p.errorAt(base, path, err)
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, p.errorAt(base+dec.InputOffset(), path, err)
		}
		key, _ := tok.(string)
		i := dec.InputOffset()
		for i < int64(len(raw)) && strings.IndexByte(" \t\r\n:", raw[i]) >= 0 {
			i++
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, p.errorAt(base+i, path, err)
		}
		name := key
		if path != "" {
			name = path + "." + key
		}
		out = append(out, member{key: name, raw: val, off: base + i})
	}
	return out, nil
}

func (p *parser) errorAt(off int64, key string, err error) error {
	line, col := position(p.data, off)
	return &Error{File: p.file, Line: line, Column: col, Key: key, Err: err}
}

func (p *parser) top(l *layer, m member) error {
	switch m.key {
	case "provider":
		return p.oneOf(m, &l.Provider, providers)
	case "model":
		return p.str(m, &l.Model)
	case "baseURL":
		if err := p.str(m, &l.BaseURL); err != nil || l.BaseURL == nil {
			return err
		}
		return p.check(m, checkBaseURL(quote(m.key), *l.BaseURL))
	case "apiKey":
		return p.str(m, &l.APIKey)
	case "thinking":
		return p.oneOf(m, &l.Thinking, thinkings)
	case "agent":
		return p.oneOf(m, &l.Agent, agent.VariantNames())
	case "openaiAPI":
		return p.oneOf(m, &l.OpenAIAPI, openaiAPIs)
	case "maxRetries":
		if err := p.decode(m, &l.MaxRetries, "a whole number", "a number"); err != nil || l.MaxRetries == nil {
			return err
		}
		if *l.MaxRetries < 0 {
			return p.check(m, fmt.Errorf("%q must be 0 or more", m.key))
		}
	case "compactThreshold":
		if err := p.decode(m, &l.CompactThreshold, "a whole number", "a number"); err != nil || l.CompactThreshold == nil {
			return err
		}
		if *l.CompactThreshold <= 0 {
			return p.check(m, fmt.Errorf("%q must be more than 0", m.key))
		}
	case "toolSets":
		return p.decode(m, &l.ToolSets, "a list of strings", "an array")
	case "plugins":
		return p.decode(m, &l.Plugins, "a list of strings", "an array")
	case "yolo":
		return p.decode(m, &l.Yolo, "true or false", "a boolean")
	case "sandbox":
		if isNull(m.raw) {
			return nil
		}
		members, err := p.object(m, m.key)
		if err != nil {
			return err
		}
		for _, sm := range members {
			if err := p.sandbox(l, sm); err != nil {
				return err
			}
		}
	case "trust":
		if isNull(m.raw) {
			return nil
		}
		members, err := p.object(m, m.key)
		if err != nil {
			return err
		}
		for _, tm := range members {
			if tm.key != "trust.paths" {
				p.unknown(tm.key, trustKeys, "trust.")
				continue
			}
			if err := p.decode(tm, &l.TrustPaths, "a list of paths or glob patterns", "an array"); err != nil {
				return err
			}
		}
	case "network":
		if isNull(m.raw) {
			return nil
		}
		members, err := p.object(m, m.key)
		if err != nil {
			return err
		}
		for _, nm := range members {
			var dst **[]string
			switch nm.key {
			case "network.allow":
				dst = &l.NetAllow
			case "network.deny":
				dst = &l.NetDeny
			case "network.credentials":
				cs, err := parseCredentials(nm.raw)
				if err != nil {
					return p.check(nm, err)
				}
				l.NetCreds = &cs
				continue
			default:
				p.unknown(nm.key, []string{"allow", "deny", "credentials"}, "network.")
				continue
			}
			if err := p.decode(nm, dst, "a list of host patterns", "an array"); err != nil || *dst == nil {
				return err
			}
			for _, pat := range **dst {
				if _, err := egress.ParsePattern(pat); err != nil {
					return p.check(nm, fmt.Errorf("%q: %w", nm.key, err))
				}
			}
		}
	case "mcpServers":
		if isNull(m.raw) {
			return nil
		}
		members, err := p.object(m, m.key)
		if err != nil {
			return err
		}
		l.MCPServers = map[string]json.RawMessage{}
		for _, sm := range members {
			if _, err := p.object(sm, sm.key); err != nil {
				return err
			}
			l.MCPServers[strings.TrimPrefix(sm.key, "mcpServers.")] = sm.raw
		}
	default:
		p.unknown(m.key, topKeys, "")
	}
	return nil
}

func (p *parser) sandbox(l *layer, m member) error {
	switch strings.TrimPrefix(m.key, "sandbox.") {
	case "image":
		return p.str(m, &l.Image)
	case "network":
		return p.oneOf(m, &l.Network, networks)
	case "memory":
		if err := p.str(m, &l.Memory); err != nil || l.Memory == nil {
			return err
		}
		_, err := checkMemory(quote(m.key), *l.Memory)
		return p.check(m, err)
	case "cpus":
		if err := p.decode(m, &l.CPUs, "a number", "a number"); err != nil || l.CPUs == nil {
			return err
		}
		if *l.CPUs <= 0 {
			return p.check(m, fmt.Errorf("%q must be more than 0", m.key))
		}
	case "pids":
		if err := p.decode(m, &l.Pids, "a whole number", "a number"); err != nil || l.Pids == nil {
			return err
		}
		if *l.Pids <= 0 {
			return p.check(m, fmt.Errorf("%q must be more than 0", m.key))
		}
	case "env":
		if err := p.decode(m, &l.Env, "a list of strings", "an array"); err != nil || l.Env == nil {
			return err
		}
		return p.check(m, checkEnvEntries(quote(m.key), *l.Env))
	case "noSandbox":
		return p.decode(m, &l.NoSandbox, "true or false", "a boolean")
	default:
		p.unknown(m.key, sandboxKeys, "sandbox.")
	}
	return nil
}

func (p *parser) unknown(key string, known []string, prefix string) {
	msg := fmt.Sprintf("unknown key %q is ignored", key)
	bare := strings.TrimPrefix(key, prefix)
	for _, k := range known {
		if strings.EqualFold(k, bare) {
			msg += fmt.Sprintf(" (did you mean %q?)", prefix+k)
			break
		}
	}
	p.notices = append(p.notices, Notice{File: p.file, Key: key, Message: msg})
}

// decode reads m's value into dst (a pointer to a pointer, left nil by
// JSON null). want describes the expected value, wantKind its JSON kind.
// The message names the kinds, never the value: it may be a secret.
func (p *parser) decode(m member, dst any, want, wantKind string) error {
	if err := json.Unmarshal(m.raw, dst); err != nil {
		msg := fmt.Sprintf("%q must be %s", m.key, want)
		if k := kindOf(m.raw); k != wantKind {
			msg += ", not " + k
		}
		return p.errorAt(m.off, m.key, errors.New(msg))
	}
	return nil
}

func (p *parser) str(m member, dst **string) error {
	return p.decode(m, dst, "a string", "a string")
}

func (p *parser) oneOf(m member, dst **string, valid []string) error {
	if err := p.str(m, dst); err != nil || *dst == nil {
		return err
	}
	return p.check(m, checkOneOf(quote(m.key), **dst, valid))
}

// check places a value error at m.
func (p *parser) check(m member, err error) error {
	if err == nil {
		return nil
	}
	return p.errorAt(m.off, m.key, err)
}

func kindOf(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

func quote(key string) string { return strconv.Quote(key) }

// Value checks shared by files (label `"key"`), the environment
// (SHIRO_X) and flags (--x).

func checkOneOf(label, v string, valid []string) error {
	if slices.Contains(valid, v) {
		return nil
	}
	return fmt.Errorf("%s must be one of %s (got %q)", label, strings.Join(valid, ", "), v)
}

// checkBaseURL accepts an absolute http or https URL. The URL is not quoted
// back: it may carry credentials.
func checkBaseURL(label, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s must be an http or https URL", label)
	}
	return nil
}

// checkMemory reads a size like 512m, 4g, 1.5g or 1048576 (bytes).
func checkMemory(label, v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	s = strings.TrimSuffix(s, "b")
	mult := 1.0
	if s != "" {
		if i := strings.IndexByte("kmgt", s[len(s)-1]); i >= 0 {
			mult = float64(int64(1) << (10 * (i + 1)))
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 || n*mult >= 1<<62 {
		return 0, fmt.Errorf("%s must be a size like 512m or 4g (got %q)", label, v)
	}
	return int64(n * mult), nil
}

// checkEnvEntries accepts NAME and NAME=value. Only the name is quoted back.
func checkEnvEntries(label string, entries []string) error {
	for i, e := range entries {
		name, _, _ := strings.Cut(e, "=")
		if name == "" || strings.ContainsAny(name, " \t\r\n") {
			return fmt.Errorf("%s entry %d (%q) must be NAME or NAME=value", label, i+1, name)
		}
	}
	return nil
}

// merger folds the sources together, lowest first.
type merger struct {
	l          layer
	projectMCP map[string]json.RawMessage
	known      []string
	notices    []Notice

	// imageFromProject: the image setting in l is the project file's.
	imageFromProject bool
	// trustPaths are the user's trust.paths.
	trustPaths *[]string
	// net holds the host rules gathered so far.
	net NetworkRules
}

func (m *merger) note(file, key, msg string) {
	m.notices = append(m.notices, Notice{File: file, Key: key, Message: msg})
}

// user merges the user's file: it may set everything.
func (m *merger) user(u *layer, file string) {
	m.toolSets(u, file)
	m.overlay(u)
	m.l.MCPServers = u.MCPServers
	m.trustPaths = u.TrustPaths
	m.hostRules(u.NetAllow, &m.net.Allow, "network.allow in "+file)
	m.hostRules(u.NetDeny, &m.net.Deny, "network.deny in "+file)
	m.net.Credentials = credentials(u.NetCreds, file)
}

// hostRules appends the patterns to dst, naming their source.
func (m *merger) hostRules(pats *[]string, dst *[]HostRule, source string) {
	if pats == nil {
		return
	}
	for _, p := range *pats {
		c, _ := egress.ParsePattern(p) // checked when read
		*dst = append(*dst, HostRule{Pattern: c, Source: source})
	}
}

// networkRank orders the network modes from the tightest.
func networkRank(n string) int {
	switch n {
	case NetworkNone:
		return 0
	case NetworkOpen, NetworkBridge:
		return 2
	}
	return 1
}

// project merges the project file minus what an untrusted repository must
// not decide. laterProvider and laterNetwork say that the environment or
// flags set those keys anyway (the project's value would not count).
func (m *merger) project(p *layer, laterProvider, laterNetwork bool) {
	f := projectFileName
	if p.Yolo != nil && *p.Yolo {
		m.note(f, "yolo", `"yolo" is ignored: a project cannot turn off approvals`)
		p.Yolo = nil
	}
	if p.APIKey != nil {
		if *p.APIKey != "" {
			m.note(f, "apiKey", `"apiKey" is ignored: a project cannot choose the API key (set it in your user config or SHIRO_API_KEY)`)
		}
		p.APIKey = nil
	}
	if p.BaseURL != nil {
		m.note(f, "baseURL", `"baseURL" is ignored: a project cannot send your API key to another server`)
		p.BaseURL = nil
	}
	if p.Provider != nil {
		current := DefaultProvider
		if m.l.Provider != nil {
			current = *m.l.Provider
		}
		if *p.Provider != current && !laterProvider {
			m.note(f, "provider", fmt.Sprintf(`"provider" is ignored: a project cannot send your API key to another provider (yours is %s)`, current))
		}
		p.Provider = nil
	}
	if p.Plugins != nil && !slices.Contains(*p.Plugins, guardPlugin) {
		m.note(f, "plugins", `"plugins" cannot turn off the guard: it stays on`)
		withGuard := append([]string{guardPlugin}, *p.Plugins...)
		p.Plugins = &withGuard
	}
	if p.TrustPaths != nil {
		m.note(f, "trust", `"trust" is ignored: a project cannot trust itself`)
		p.TrustPaths = nil
	}
	if p.NoSandbox != nil && *p.NoSandbox {
		m.note(f, "sandbox.noSandbox", `"sandbox.noSandbox" is ignored: a project cannot turn off the sandbox`)
		p.NoSandbox = nil
	}
	if p.Env != nil {
		var kept []string
		for _, e := range *p.Env {
			if !strings.Contains(e, "=") {
				m.note(f, "sandbox.env", fmt.Sprintf(`"sandbox.env" entry %q is ignored: a project cannot pass host environment variables into the sandbox (NAME=value constants are allowed)`, e))
				continue
			}
			kept = append(kept, e)
		}
		p.Env = &kept
	}
	if p.Network != nil && !laterNetwork {
		current := NetworkAsk
		if m.l.Network != nil {
			current = *m.l.Network
		}
		if networkRank(*p.Network) > networkRank(current) {
			m.note(f, "sandbox.network", fmt.Sprintf(`"sandbox.network" %q is ignored: a project can narrow the sandbox network, not widen it (yours is %s)`, *p.Network, current))
			p.Network = nil
		}
	}
	if p.NetAllow != nil && len(*p.NetAllow) > 0 {
		m.note(f, "network.allow", `"network.allow" is ignored: a project can add denials, not allowances (allow hosts in your user config or with --allow-host)`)
	}
	p.NetAllow = nil
	if p.NetCreds != nil {
		m.note(f, "network.credentials", `"network.credentials" is ignored: a project cannot name credentials (set them in your user config)`)
		p.NetCreds = nil
	}
	m.hostRules(p.NetDeny, &m.net.Deny, "network.deny in "+f)
	m.limits(p, f)
	m.toolSets(p, f)
	m.overlay(p)
	m.imageFromProject = p.Image != nil
	m.projectMCP = p.MCPServers // they run in the sandbox, apart from the user's
}

// limits lets a project lower the sandbox's limits, never raise them above
// the user's (or the defaults): a repository must not grant itself more of
// the machine.
func (m *merger) limits(p *layer, file string) {
	raised := func(key, value, current string) {
		m.note(file, key, fmt.Sprintf(`%q %s is ignored: a project can lower the sandbox's limits, not raise them (yours is %s)`, key, value, current))
	}
	if p.Memory != nil {
		current := strconv.FormatInt(sandbox.DefaultMemory>>30, 10) + "g"
		limit := int64(sandbox.DefaultMemory)
		if m.l.Memory != nil {
			current = *m.l.Memory
			limit, _ = checkMemory("", *m.l.Memory) // checked when read
		}
		if n, _ := checkMemory("", *p.Memory); n > limit {
			raised("sandbox.memory", strconv.Quote(*p.Memory), current)
			p.Memory = nil
		}
	}
	if p.CPUs != nil {
		limit := cmp.Or(ptrValue(m.l.CPUs), sandbox.DefaultCPUs)
		if *p.CPUs > limit {
			raised("sandbox.cpus", strconv.FormatFloat(*p.CPUs, 'f', -1, 64), strconv.FormatFloat(limit, 'f', -1, 64))
			p.CPUs = nil
		}
	}
	if p.Pids != nil {
		limit := cmp.Or(ptrValue(m.l.Pids), sandbox.DefaultPids)
		if *p.Pids > limit {
			raised("sandbox.pids", strconv.FormatInt(*p.Pids, 10), strconv.FormatInt(limit, 10))
			p.Pids = nil
		}
	}
}

// ptrValue is *p, or the zero value for nil.
func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// toolSets drops the names the tools package does not know.
func (m *merger) toolSets(l *layer, file string) {
	if l.ToolSets == nil || m.known == nil {
		return
	}
	var kept []string
	for _, n := range *l.ToolSets {
		if !slices.Contains(m.known, n) {
			m.note(file, "toolSets", fmt.Sprintf("unknown tool set %q is ignored (known sets: %s)", n, strings.Join(m.known, ", ")))
			continue
		}
		kept = append(kept, n)
	}
	if kept == nil {
		kept = []string{}
	}
	l.ToolSets = &kept
}

// overlay sets what l sets; env entries accumulate. MCP servers are not
// merged here: user and project servers stay apart.
func (m *merger) overlay(l *layer) {
	overlayField(&m.l.Provider, l.Provider)
	overlayField(&m.l.Model, l.Model)
	overlayField(&m.l.BaseURL, l.BaseURL)
	overlayField(&m.l.APIKey, l.APIKey)
	overlayField(&m.l.Thinking, l.Thinking)
	overlayField(&m.l.Agent, l.Agent)
	overlayField(&m.l.OpenAIAPI, l.OpenAIAPI)
	overlayField(&m.l.Image, l.Image)
	overlayField(&m.l.Network, l.Network)
	overlayField(&m.l.Memory, l.Memory)
	overlayField(&m.l.MaxRetries, l.MaxRetries)
	overlayField(&m.l.CompactThreshold, l.CompactThreshold)
	overlayField(&m.l.ToolSets, l.ToolSets)
	overlayField(&m.l.Plugins, l.Plugins)
	overlayField(&m.l.Yolo, l.Yolo)
	overlayField(&m.l.CPUs, l.CPUs)
	overlayField(&m.l.Pids, l.Pids)
	overlayField(&m.l.NoSandbox, l.NoSandbox)
	if l.Env != nil {
		env := append(m.envList(), *l.Env...)
		m.l.Env = &env
	}
}

// overlayField sets *dst to src when the layer sets it.
func overlayField[T any](dst **T, src *T) {
	if src != nil {
		*dst = src
	}
}

func (m *merger) envList() []string {
	if m.l.Env == nil {
		return nil
	}
	return slices.Clone(*m.l.Env)
}

// envLayer reads SHIRO_PROVIDER, SHIRO_MODEL, SHIRO_BASE_URL and
// SHIRO_API_KEY; empty values count as unset.
func envLayer(getenv func(string) (string, bool)) (*layer, error) {
	get := func(name string) *string {
		if v, ok := getenv(name); ok && v != "" {
			return &v
		}
		return nil
	}
	l := &layer{Provider: get("SHIRO_PROVIDER"), Model: get("SHIRO_MODEL"), BaseURL: get("SHIRO_BASE_URL"), APIKey: get("SHIRO_API_KEY"), OpenAIAPI: get("SHIRO_OPENAI_API")}
	if l.OpenAIAPI != nil {
		if err := checkOneOf("SHIRO_OPENAI_API", *l.OpenAIAPI, openaiAPIs); err != nil {
			return nil, &Error{Key: "SHIRO_OPENAI_API", Err: err}
		}
	}
	if l.Provider != nil {
		if err := checkOneOf("SHIRO_PROVIDER", *l.Provider, providers); err != nil {
			return nil, &Error{Key: "SHIRO_PROVIDER", Err: err}
		}
	}
	if l.BaseURL != nil {
		if err := checkBaseURL("SHIRO_BASE_URL", *l.BaseURL); err != nil {
			return nil, &Error{Key: "SHIRO_BASE_URL", Err: err}
		}
	}
	return l, nil
}

// flagLayer reads and checks the command line's settings.
func flagLayer(o *Overrides) (*layer, error) {
	l := &layer{
		Provider: o.Provider, Model: o.Model, BaseURL: o.BaseURL, Thinking: o.Thinking, Agent: o.Agent,
		Yolo: o.Yolo, ToolSets: o.ToolSets, Plugins: o.Plugins,
		Image: o.Image, Network: o.Network, Memory: o.Memory, CPUs: o.CPUs, Pids: o.Pids,
		NoSandbox: o.NoSandbox,
	}
	if o.Env != nil {
		l.Env = &o.Env
	}
	var errs []error
	bad := func(flag string, err error) {
		if err != nil {
			errs = append(errs, &Error{Key: flag, Err: err})
		}
	}
	if l.Provider != nil {
		bad("--provider", checkOneOf("--provider", *l.Provider, providers))
	}
	if l.BaseURL != nil {
		bad("--base-url", checkBaseURL("--base-url", *l.BaseURL))
	}
	// The spec's own texts: Unknown agent "x". Available: default, ...
	if l.Agent != nil {
		_, err := agent.ResolveVariant(*l.Agent, "")
		bad("--agent", err)
	}
	if l.Thinking != nil {
		_, err := agent.ParseThinking(*l.Thinking)
		bad("--think", err)
	}
	if l.Network != nil {
		bad("--network", checkOneOf("--network", *l.Network, networks))
	}
	if l.Memory != nil {
		_, err := checkMemory("--memory", *l.Memory)
		bad("--memory", err)
	}
	if l.CPUs != nil && *l.CPUs <= 0 {
		bad("--cpus", errors.New("--cpus must be more than 0"))
	}
	if l.Pids != nil && *l.Pids <= 0 {
		bad("--pids", errors.New("--pids must be more than 0"))
	}
	if l.Env != nil {
		bad("--env", checkEnvEntries("--env", *l.Env))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return l, nil
}

// finish applies the defaults.
func (m *merger) finish(getenv func(string) (string, bool)) Config {
	l := &m.l
	or := func(p *string, def string) string {
		if p != nil && *p != "" {
			return *p
		}
		return def
	}
	c := Config{
		Provider:          or(l.Provider, DefaultProvider),
		Thinking:          or(l.Thinking, ""),
		Agent:             or(l.Agent, agent.DefaultVariant),
		OpenAIAPI:         or(l.OpenAIAPI, ""),
		MaxRetries:        DefaultMaxRetries,
		CompactThreshold:  DefaultCompactThreshold,
		Plugins:           slices.Clone(DefaultPlugins),
		MCPServers:        l.MCPServers,
		ProjectMCPServers: m.projectMCP,
	}
	if m.trustPaths != nil {
		c.TrustPaths = slices.Clone(*m.trustPaths)
	}
	c.Model = or(l.Model, DefaultModel[c.Provider])
	c.BaseURL = or(l.BaseURL, DefaultBaseURL[c.Provider])
	c.APIKey = or(l.APIKey, "")
	if c.APIKey == "" {
		// A provider's own variable serves only that provider: an
		// openai-compatible server is someone else, it gets no OpenAI key.
		switch c.Provider {
		case ProviderAnthropic:
			c.APIKey, _ = getenv("ANTHROPIC_API_KEY")
		case ProviderOpenAI:
			c.APIKey, _ = getenv("OPENAI_API_KEY")
		}
	}
	if l.MaxRetries != nil {
		c.MaxRetries = *l.MaxRetries
	}
	if l.CompactThreshold != nil {
		c.CompactThreshold = *l.CompactThreshold
	}
	if l.ToolSets != nil {
		c.ToolSets, c.ToolSetsPresent = slices.Clone(*l.ToolSets), true
		if c.ToolSets == nil {
			c.ToolSets = []string{}
		}
	}
	if l.Plugins != nil {
		c.Plugins = slices.Clone(*l.Plugins)
	}
	if l.Yolo != nil {
		c.Yolo = *l.Yolo
	}
	c.Sandbox = Sandbox{
		Image:   or(l.Image, ""),
		Network: or(l.Network, NetworkAsk),
	}
	if c.Sandbox.Network == NetworkBridge {
		c.Sandbox.Network = NetworkOpen
	}
	c.Network = m.net
	c.Sandbox.ImageFromProject = m.imageFromProject && c.Sandbox.Image != ""
	if l.Memory != nil {
		c.Sandbox.Memory, _ = checkMemory("", *l.Memory) // checked when read
	}
	if l.CPUs != nil {
		c.Sandbox.CPUs = *l.CPUs
	}
	if l.Pids != nil {
		c.Sandbox.Pids = *l.Pids
	}
	if l.NoSandbox != nil {
		c.Sandbox.NoSandbox = *l.NoSandbox
	}
	if l.Env != nil {
		c.Sandbox.Env = dedupeEnv(*l.Env)
	}
	return c
}

// dedupeEnv keeps the last entry of each name, in the order of those last
// entries, so a later source overrides an earlier one.
func dedupeEnv(entries []string) []string {
	last := map[string]int{}
	for i, e := range entries {
		name, _, _ := strings.Cut(e, "=")
		last[name] = i
	}
	out := make([]string, 0, len(last))
	for i, e := range entries {
		name, _, _ := strings.Cut(e, "=")
		if last[name] == i {
			out = append(out, e)
		}
	}
	return out
}
