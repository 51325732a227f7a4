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
