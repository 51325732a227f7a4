package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shiroagent/shiro/internal/confine"
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
	m := &merger{vals: layer{}, from: map[string]sourceKind{}, apart: layer{}, known: opts.KnownToolSets}

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
	m.merge(user, source{fromUser, userFile})

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
		m.later = func(name string) bool { _, e := env[name]; _, f := flags[name]; return e || f }
		m.merge(proj, source{fromProject, projectFileName})
	}
	m.merge(env, source{fromEnv, "environment"})
	m.merge(flags, source{fromFlags, "command line"})
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

// layer is what one source sets, by key name; an absent key is not set.
type layer map[string]any

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
func parseFile(data []byte, file string) (layer, []Notice, error) {
	l := layer{}
	if len(bytes.TrimSpace(data)) == 0 {
		return l, nil, nil
	}
	if err := checkSyntax(data, file); err != nil {
		return nil, nil, err
	}
	p := &parser{data: data, file: file}
	if err := p.members(l, member{raw: data, off: 0}, ""); err != nil {
		return nil, nil, err
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

// members reads the object v (path names it, "" for the file) into l:
// keys of the table, groups of them ("sandbox") and unknown keys.
func (p *parser) members(l layer, v member, path string) error {
	members, err := p.object(v, path)
	if err != nil {
		return err
	}
	for _, m := range members {
		if k := keyNamed(m.key); k != nil {
			val, err := p.value(k, m)
			if err != nil {
				return err
			}
			if val != nil {
				l[k.name] = val
			}
			continue
		}
		if slices.ContainsFunc(keys, func(k *key) bool { return strings.HasPrefix(k.name, m.key+".") }) {
			if isNull(m.raw) {
				continue
			}
			if err := p.members(l, m, m.key); err != nil {
				return err
			}
			continue
		}
		p.unknown(m.key, path)
	}
	return nil
}

// value reads and checks one key's value; nil means null.
func (p *parser) value(k *key, m member) (any, error) {
	if k.kind.parse != nil {
		return k.kind.parse(p, m)
	}
	v, err := k.kind.decode(m.raw)
	if err != nil {
		return nil, p.errorAt(m.off, m.key, mustBe(k, quote(m.key), kindOf(m.raw)))
	}
	if v == nil {
		return nil, nil
	}
	if err := k.validate(quote(m.key), v); err != nil {
		return nil, p.errorAt(m.off, m.key, err)
	}
	return v, nil
}

// validate checks a value from any source.
func (k *key) validate(label string, v any) error {
	if k.values != nil {
		if err := checkOneOf(label, v.(string), k.values); err != nil {
			return err
		}
	}
	if k.check != nil {
		return k.check(label, v)
	}
	return nil
}

// mustBe is a type error. It names the kinds, never the value: it may be
// a secret. got is the JSON kind found ("" when unknown).
func mustBe(k *key, label, got string) error {
	msg := fmt.Sprintf("%s must be %s", label, cmp.Or(k.want, k.kind.want))
	if got != "" && got != k.kind.json {
		msg += ", not " + got
	}
	return errors.New(msg)
}

// unknown notes a key that is not in the table, suggesting the one it
// differs from only in case.
func (p *parser) unknown(name, path string) {
	msg := fmt.Sprintf("unknown key %q is ignored", name)
	prefix := ""
	if path != "" {
		prefix = path + "."
	}
	bare := strings.TrimPrefix(name, prefix)
	for _, k := range children(path) {
		if strings.EqualFold(k, bare) {
			msg += fmt.Sprintf(" (did you mean %q?)", prefix+k)
			break
		}
	}
	p.notices = append(p.notices, Notice{File: p.file, Key: name, Message: msg})
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

// envLayer reads the keys' SHIRO_* variables; empty values count as unset.
func envLayer(getenv func(string) (string, bool)) (layer, error) {
	l := layer{}
	for _, k := range keys {
		s, ok := getenv(k.env)
		if k.env == "" || !ok || s == "" {
			continue
		}
		var v any = s
		if k.kind != kString {
			var err error
			if v, err = k.kind.decode([]byte(s)); err != nil || v == nil {
				return nil, &Error{Key: k.env, Err: mustBe(k, k.env, "")}
			}
		}
		if err := k.validate(k.env, v); err != nil {
			return nil, &Error{Key: k.env, Err: err}
		}
		l[k.name] = v
	}
	return l, nil
}

// flagLayer reads and checks the command line's settings.
func flagLayer(o *Overrides) (layer, error) {
	l := layer{}
	var errs []error
	for _, k := range keys {
		if k.override == nil {
			continue
		}
		v := flagValue(k.override(o))
		if v == nil {
			continue
		}
		err := k.validate(k.flag, v)
		if k.flagCheck != nil {
			err = k.flagCheck(v)
		}
		if err != nil {
			errs = append(errs, &Error{Key: k.flag, Err: err})
			continue
		}
		l[k.name] = v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return l, nil
}

// flagValue reads an Overrides field: a **T, nil when the flag was not
// given, or a *[]string, nil when it has no entries.
func flagValue(p any) any {
	if s, ok := p.(*[]string); ok {
		if *s == nil {
			return nil
		}
		return *s
	}
	v := reflect.ValueOf(p).Elem()
	if v.IsNil() {
		return nil
	}
	return v.Elem().Interface()
}

// sourceKind is where a layer comes from.
type sourceKind int

const (
	fromDefault sourceKind = iota
	fromUser
	fromProject
	fromEnv
	fromFlags
)

// source is a layer's origin; file names it in notices.
type source struct {
	kind sourceKind
	file string
}

// merger folds the sources together, lowest first.
type merger struct {
	vals    layer
	from    map[string]sourceKind // which source set each value in vals
	apart   layer                 // the project's values of keys kept apart
	known   []string
	notices []Notice
	// later says the environment or a flag sets the key.
	later func(name string) bool
}

// merge folds in one source's layer, in the table's order.
func (m *merger) merge(l layer, src source) {
	for _, k := range keys {
		v, ok := l[k.name]
		if !ok {
			continue
		}
		if src.kind == fromProject {
			if v, ok = m.judge(k, v); !ok {
				continue
			}
			if k.project.apart {
				m.apart[k.name] = v
				continue
			}
		}
		if k.tidy != nil {
			v = k.tidy(m, src.file, v)
		}
		if k.kind.merge != nil {
			label := k.flag
			if src.kind != fromFlags {
				label = k.name + " in " + src.file
			}
			v = k.kind.merge(m.vals[k.name], v, label)
		}
		m.vals[k.name], m.from[k.name] = v, src.kind
	}
}

// judge holds a project's value to the key's project rule: it returns
// what is kept, and false when nothing is.
func (m *merger) judge(k *key, v any) (any, bool) {
	r := &k.project
	if r.overridable && m.later(k.name) {
		return nil, false
	}
	cur, ok := m.vals[k.name]
	if !ok {
		cur = cmp.Or(k.def, r.base)
	}
	switch r.mode {
	case projectNever:
		if r.quiet == nil || !r.quiet(v, cur) {
			m.refuse(k, v, cur)
		}
		return nil, false
	case projectTighten:
		if r.each {
			var kept []string
			for _, e := range v.([]string) {
				if r.looser(e, cur) {
					m.refuse(k, e, cur)
				} else {
					kept = append(kept, e)
				}
			}
			return kept, true
		}
		if r.looser(v, cur) {
			m.refuse(k, v, cur)
			if r.repair == nil {
				return nil, false
			}
			return r.repair(v), true
		}
	}
	return v, true
}

// refuse notes the refusal of a project's value.
func (m *merger) refuse(k *key, v, cur any) {
	msg := strings.NewReplacer("{key}", quote(k.name), "{value}", show(v, true), "{current}", show(cur, false)).Replace(k.project.notice)
	m.notices = append(m.notices, Notice{File: projectFileName, Key: cmp.Or(k.project.noticeKey, k.name), Message: msg})
}

// knownToolSets drops the tool set names the tools package does not know.
func (m *merger) knownToolSets(file string, v any) any {
	if m.known == nil {
		return v
	}
	kept := []string{}
	for _, n := range v.([]string) {
		if !slices.Contains(m.known, n) {
			m.notices = append(m.notices, Notice{File: file, Key: "toolSets",
				Message: fmt.Sprintf("unknown tool set %q is ignored (known sets: %s)", n, strings.Join(m.known, ", "))})
			continue
		}
		kept = append(kept, n)
	}
	return kept
}

// finish puts the merged values, or the defaults, into a Config.
func (m *merger) finish(getenv func(string) (string, bool)) Config {
	var c Config
	for _, k := range keys {
		v, ok := m.vals[k.name]
		if !ok || v == "" { // an empty string is unset
			v = k.def
		}
		if v != nil {
			k.apply(&c, k.field, v)
		}
		if v, ok := m.apart[k.name]; ok {
			k.apply(&c, k.project.projectField, v)
		}
	}
	c.Model = cmp.Or(c.Model, DefaultModel[c.Provider])
	c.BaseURL = cmp.Or(c.BaseURL, DefaultBaseURL[c.Provider])
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
	// A project's image may name files inside the workspace only.
	c.Sandbox.ImageFromProject = m.from["sandbox.image"] == fromProject && c.Sandbox.Image != ""
	return c
}

// apply puts v into the Config field at.
func (k *key) apply(c *Config, at func(*Config) any, v any) {
	if k.set != nil {
		k.set(c, v)
		return
	}
	if k.conv != nil {
		v = k.conv(v)
	}
	if s, ok := v.([]string); ok {
		v = slices.Clone(s)
	}
	reflect.ValueOf(at(c)).Elem().Set(reflect.ValueOf(v))
}
