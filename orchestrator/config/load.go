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
	// Root is the workspace directory, held open (the run's one open of
	// it): the project file is read through it. Required with Workspace.
	Root *os.Root
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
	values := newState()
	if err := values.readEnv(getenv); err != nil {
		return Config{}, nil, err
	}
	if err := values.readFlags(&opts.Flags); err != nil {
		return Config{}, nil, err
	}
	m := &merger{slots: values, from: map[string]sourceKind{}, known: opts.KnownToolSets}

	var userFile string
	var data []byte
	var err error
	if opts.Paths.ConfigDir != "" {
		userFile = opts.Paths.ConfigFile()
		if data, err = readUserFile(userFile); err != nil {
			return Config{}, nil, err
		}
	}
	notices, err := parseFile(data, userFile, values, fromUser)
	if err != nil {
		return Config{}, nil, err
	}
	m.notices = notices
	m.merge(source{fromUser, userFile})

	if opts.Workspace != "" && filepath.Clean(ProjectConfigFile(opts.Workspace)) != filepath.Clean(userFile) {
		data, notice, err := readProjectFile(opts.Root)
		if err != nil {
			return Config{}, nil, err
		}
		if notice != nil {
			m.notices = append(m.notices, *notice)
		}
		notices, err := parseFile(data, projectFileName, values, fromProject)
		if err != nil {
			return Config{}, nil, err
		}
		m.notices = append(m.notices, notices...)
		m.merge(source{fromProject, projectFileName})
	}
	m.merge(source{fromEnv, "environment"})
	m.merge(source{fromFlags, "command line"})
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

// readProjectFile reads <workspace>/.shiro/config.json through root, the
// workspace's os.Root: a symlink is followed only while it stays inside, and
// only a regular file is read (opened without blocking: a FIFO would stall
// start-up). A missing file is an empty one; one that is refused is
// skipped with a notice that says why.
func readProjectFile(root *os.Root) ([]byte, *Notice, error) {
	if root == nil {
		return nil, nil, errors.New("read project config: the workspace is not open")
	}
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

// parser reads one file into the slots of a state, as the values of
// one source.
type parser struct {
	data    []byte
	file    string
	into    state
	src     sourceKind
	notices []Notice
}

// parseFile reads a config file's content into the slots of into, as
// src's values: syntax, types, values and unknown keys. Empty content is
// an empty configuration.
func parseFile(data []byte, file string, into state, src sourceKind) ([]Notice, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	if err := checkSyntax(data, file); err != nil {
		return nil, err
	}
	p := &parser{data: data, file: file, into: into, src: src}
	if err := p.members(member{raw: data, off: 0}, ""); err != nil {
		return nil, err
	}
	return p.notices, nil
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

// members reads the object v (path names it, "" for the file) into the
// parser's slots: keys of the table, groups of them ("sandbox") and
// unknown keys.
func (p *parser) members(v member, path string) error {
	members, err := p.object(v, path)
	if err != nil {
		return err
	}
	for _, m := range members {
		if s := p.into.named(m.key); s != nil {
			if err := s.parse(p, m); err != nil {
				return err
			}
			continue
		}
		if slices.ContainsFunc(keys, func(e entry) bool { return strings.HasPrefix(e.meta().name, m.key+".") }) {
			if isNull(m.raw) {
				continue
			}
			if err := p.members(m, m.key); err != nil {
				return err
			}
			continue
		}
		p.unknown(m.key, path)
	}
	return nil
}

// parse reads and checks the key's value in a file; null leaves the
// source's value as it was.
func (s *slotOf[T]) parse(p *parser, m member) error {
	v, ok, err := s.k.read(p, m)
	if ok {
		s.set[p.src] = some(v)
	}
	return err
}

// read reads and checks one member's value; ok is false for null.
func (k *keyOf[T]) read(p *parser, m member) (v T, ok bool, err error) {
	if k.kind.parse != nil {
		return k.kind.parse(p, m)
	}
	v, ok, err = k.kind.decode(m.raw)
	if err != nil {
		return v, false, p.errorAt(m.off, m.key, mustBe(&k.key, &k.kind.kindInfo, quote(m.key), kindOf(m.raw)))
	}
	if !ok {
		return v, false, nil
	}
	if err := k.validate(quote(m.key), v); err != nil {
		return v, false, p.errorAt(m.off, m.key, err)
	}
	return v, true, nil
}

// mustBe is a type error of key k, of kind kind. It names the kinds,
// never the value: it may be a secret. got is the JSON kind found (""
// when unknown).
func mustBe(k *key, kind *kindInfo, label, got string) error {
	msg := fmt.Sprintf("%s must be %s", label, cmp.Or(k.want, kind.want))
	if got != "" && got != kind.json {
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
