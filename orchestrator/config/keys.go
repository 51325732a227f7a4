package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/sandbox/publish"
)

// entry is one key of the table, whatever the type of its value: the
// loader reaches the typed parts only through these methods and the
// key's slot.
type entry interface {
	// meta is what is known of the key without its type.
	meta() *key
	// kindInfo describes the kind of its value.
	kindInfo() *kindInfo
	// helpDefault is the default as the help listing shows it.
	helpDefault() string
	// newSlot is the key's state for one Load.
	newSlot() slot
}

// key is what the table knows of a key whatever its type: its names, its
// texts and the words of its project rule. A new key is an entry in keys
// (with its Config field, and its Overrides field when it has a flag) and
// its sample in keys_test.go.
type key struct {
	name string // the dotted path in the files: "sandbox.memory"
	want string // what a file's value must be, in errors; "" is the kind's
	doc  string // one line for the help listing
	// defText is the default as the help shows it when the key's def (or
	// its project base) does not say it.
	defText string
	env     string // the environment variable; "" for none
	flag    string // the command-line flag; "" for none
	project projectRule
}

// keyOf is a key whose value is a T: everything that parsing, the
// environment, the flags, merging, the project refusals and Config know
// of it, typed by T so that a part of the wrong type does not compile.
type keyOf[T any] struct {
	key
	kind *kind[T]
	// check validates a value from any source, after the kind's check;
	// label names the source (`"key"`, SHIRO_X, --x) and starts the
	// message.
	check func(label string, v T) error
	// def is the value when no source sets one (none: Config's zero).
	def opt[T]
	// override points at the flag's field in Overrides, nil when the flag
	// was not given; entries replaces it for a flag whose entries add to
	// the configured ones (nil when it has none).
	override func(o *Overrides) **T
	entries  func(o *Overrides) *[]string
	// flagCheck replaces the checks for the flag's value.
	flagCheck func(v T) error
	// tidy adjusts a value from any source before it is merged.
	tidy func(m *merger, file string, v T) T
	// to is the key's place in Config.
	to store[T]

	// The typed parts of the project rule (key.project has its mode and
	// words).

	// quiet (never) says the value needs no notice; it is dropped anyway.
	quiet func(v, current T) bool
	// looser (tighten) says v widens current; repair makes a loose value
	// safe instead of dropping it.
	looser func(v, current T) bool
	repair func(v T) T
	// narrow (tighten) judges each entry instead of the whole value: it
	// keeps the tight ones and returns the loose ones, which go.
	narrow func(v T) (kept T, loose []string)
	// base (tighten) is current when no source set the key and it has no
	// def.
	base opt[T]
	// apart: the project's value goes here, not merged.
	apart store[T]
}

// meta is the untyped part of the key.
func (k *keyOf[T]) meta() *key { return &k.key }

// kindInfo is the untyped part of the key's kind.
func (k *keyOf[T]) kindInfo() *kindInfo { return &k.kind.kindInfo }

// newSlot is a slot of the key where no source has set anything.
func (k *keyOf[T]) newSlot() slot { return &slotOf[T]{k: k} }

// helpDefault is defText, else the def, else the project base.
func (k *keyOf[T]) helpDefault() string {
	switch {
	case k.defText != "":
		return k.defText
	case k.def.ok:
		return k.kind.text(k.def.v, false)
	case k.base.ok:
		return k.kind.text(k.base.v, false)
	}
	return ""
}

// validate checks a value from any source.
func (k *keyOf[T]) validate(label string, v T) error {
	if k.kind.check != nil {
		if err := k.kind.check(label, v); err != nil {
			return err
		}
	}
	if k.check != nil {
		return k.check(label, v)
	}
	return nil
}

// opt is a value that may be absent.
type opt[T any] struct {
	v  T
	ok bool
}

// some is the present value v.
func some[T any](v T) opt[T] { return opt[T]{v: v, ok: true} }

// projectMode is what the project file may do with a key.
type projectMode int

const (
	projectMay     projectMode = iota // set it like any other source
	projectNever                      // nothing: the value is dropped, with the notice unless quiet
	projectTighten                    // narrow it: a value looser than the current one is refused
)

// projectRule is how the untrusted project file is held to a key, but for
// the judging functions, which keyOf holds typed.
type projectRule struct {
	mode projectMode
	// notice is the refusal's text: {key} is the quoted key, {value} the
	// project's value (or entry), {current} the value it is held to.
	notice    string
	noticeKey string // the notice's Key when not the key's name
	// overridable: when the environment or a flag sets the key the
	// project's value would not count; it is dropped without a notice.
	overridable bool
	// says what a project may do, for the help ("" is the mode's own words).
	says string
}

// kindInfo describes a kind of value, whatever its type.
type kindInfo struct {
	name string // in the help listing
	want string // what the value must be: "a whole number"
	json string // the JSON kind that holds it: "a number"
	// values are the accepted values of a string kind with a fixed set
	// (nil for any other kind).
	values func() []string
}

// kind is a type of value: how it is read, checked, merged and shown.
type kind[T any] struct {
	kindInfo
	// decode reads a JSON value (ok false for null); parse replaces it
	// where nested values need their own positions.
	decode func(raw []byte) (v T, ok bool, err error)
	parse  func(p *parser, m member) (v T, ok bool, err error)
	// plain reads an environment variable's text as it is (nil: the text
	// is JSON).
	plain func(s string) T
	// fromEntries reads a list flag's entries.
	fromEntries func(e []string) T
	// check validates a value from any source.
	check func(label string, v T) error
	// merge combines the merged value with a source's (nil: replace);
	// source names where the value comes from.
	merge func(prev, v T, source string) T
	// empty says a value counts as unset (nil: none does).
	empty func(v T) bool
	// clone copies a value on its way into Config (nil: no need).
	clone func(v T) T
	// show writes a value in a notice or the help; quote puts strings in
	// quotes (nil: fmt's way).
	show func(v T, quote bool) string
}

// fromText reads an environment variable's text; ok is false for null.
func (k *kind[T]) fromText(s string) (v T, ok bool, err error) {
	if k.plain != nil {
		return k.plain(s), true, nil
	}
	return k.decode([]byte(s))
}

// text writes a value in a notice or the help.
func (k *kind[T]) text(v T, quote bool) string {
	if k.show == nil {
		return fmt.Sprint(v) // fmt takes any: it formats whatever T is
	}
	return k.show(v, quote)
}

// decodeAs reads a JSON value of type T; ok is false for null.
func decodeAs[T any](raw []byte) (v T, ok bool, err error) {
	var p *T
	if err := json.Unmarshal(raw, &p); err != nil || p == nil {
		return v, false, err
	}
	return *p, true, nil
}

var (
	kString = &kind[string]{kindInfo: kindInfo{name: "string", want: "a string", json: "a string"},
		decode: decodeAs[string], plain: sameValue[string], empty: isEmpty, show: showString}
	kSize = &kind[string]{kindInfo: kindInfo{name: "size", want: "a string", json: "a string"},
		decode: decodeAs[string], plain: sameValue[string], empty: isEmpty, show: showString}
	kInt   = &kind[int]{kindInfo: kindInfo{name: "whole number", want: "a whole number", json: "a number"}, decode: decodeAs[int]}
	kInt64 = &kind[int64]{kindInfo: kindInfo{name: "whole number", want: "a whole number", json: "a number"}, decode: decodeAs[int64]}
	kFloat = &kind[float64]{kindInfo: kindInfo{name: "number", want: "a number", json: "a number"},
		decode: decodeAs[float64], show: showFloat}
	kBool = &kind[bool]{kindInfo: kindInfo{name: "true/false", want: "true or false", json: "a boolean"}, decode: decodeAs[bool]}
	kList = &kind[[]string]{kindInfo: kindInfo{name: "list", want: "a list of strings", json: "an array"},
		decode: decodeAs[[]string], clone: slices.Clone[[]string], show: showList}
	// kEnvList is a list whose sources add up.
	kEnvList = &kind[[]string]{kindInfo: kindInfo{name: "list", want: "a list of strings", json: "an array"},
		decode: decodeAs[[]string], fromEntries: sameValue[[]string], clone: slices.Clone[[]string], show: showList,
		merge: func(prev, v []string, _ string) []string { return append(slices.Clone(prev), v...) }}
	// kHosts is a list of host patterns whose sources add up, each rule
	// naming its source.
	kHosts = &kind[[]HostRule]{kindInfo: kindInfo{name: "list", want: "a list of host patterns", json: "an array"},
		decode: decodeHosts, fromEntries: hostRules, merge: mergeHosts}
	kServers = &kind[map[string]json.RawMessage]{kindInfo: kindInfo{name: "object", want: "an object", json: "an object"},
		parse: parseServers}
	// kCredentials is network.credentials: each entry named by its place.
	kCredentials = &kind[[]Credential]{kindInfo: kindInfo{name: "list", want: `a list of {"host", "header", "env" or "command"}`, json: "an array"},
		parse: parseCredentialsKey, merge: credentialSources}
)

// oneOf is the string kind whose value must be one of values.
func oneOf(values ...string) *kind[string] {
	return oneOfNow(func() []string { return values })
}

// oneOfNow is a string that is one of the values values returns when the
// value is read (the sandbox backends registered).
func oneOfNow(values func() []string) *kind[string] {
	k := *kString
	k.values = values
	k.check = func(label, v string) error { return checkOneOf(label, v, values()) }
	return &k
}

// sameValue is v itself.
func sameValue[T any](v T) T { return v }

// isEmpty says an empty string is unset.
func isEmpty(s string) bool { return s == "" }

// showString writes a string, quoted or not.
func showString(s string, quote bool) string {
	if quote {
		return strconv.Quote(s)
	}
	return s
}

// showFloat writes a number without a needless fraction or exponent.
func showFloat(f float64, _ bool) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// showList writes a list's entries, separated by commas.
func showList(l []string, _ bool) string { return strings.Join(l, ", ") }

// hostRules are a list of patterns as rules of no source yet.
func hostRules(patterns []string) []HostRule {
	var rules []HostRule
	for _, p := range patterns {
		rules = append(rules, HostRule{Pattern: p})
	}
	return rules
}

// decodeHosts reads a list of host patterns.
func decodeHosts(raw []byte) ([]HostRule, bool, error) {
	patterns, ok, err := decodeAs[[]string](raw)
	if !ok {
		return nil, false, err
	}
	return hostRules(patterns), true, nil
}

// mergeHosts adds a source's rules, canonical and named by source, to the
// merged ones.
func mergeHosts(prev, v []HostRule, source string) []HostRule {
	rules := slices.Clone(prev)
	for _, r := range v {
		c, _ := egress.ParsePattern(r.Pattern) // checked when read
		rules = append(rules, HostRule{Pattern: c, Source: source})
	}
	return rules
}

// credentialSources names each credential of a source by its place: the
// key, its index and the file.
func credentialSources(_, v []Credential, source string) []Credential {
	name, file, _ := strings.Cut(source, " in ")
	cs := slices.Clone(v)
	for i := range cs {
		cs[i].Source = fmt.Sprintf("%s[%d] in %s", name, i, file)
	}
	return cs
}

// parseCredentialsKey reads network.credentials (parseCredentials checks
// each entry).
func parseCredentialsKey(p *parser, m member) ([]Credential, bool, error) {
	if isNull(m.raw) {
		return nil, false, nil
	}
	cs, err := parseCredentials(m.raw)
	if err != nil {
		return nil, false, p.errorAt(m.off, m.key, err)
	}
	return cs, true, nil
}

// parseServers reads mcpServers: an object of objects.
func parseServers(p *parser, m member) (map[string]json.RawMessage, bool, error) {
	if isNull(m.raw) {
		return nil, false, nil
	}
	members, err := p.object(m, m.key)
	if err != nil {
		return nil, false, err
	}
	servers := map[string]json.RawMessage{}
	for _, sm := range members {
		if _, err := p.object(sm, sm.key); err != nil {
			return nil, false, err
		}
		servers[strings.TrimPrefix(sm.key, m.key+".")] = sm.raw
	}
	return servers, true, nil
}

// store is a key's place in Config.
type store[T any] interface {
	// put sets the place to the value v.
	put(c *Config, v T)
}

// configField is a Config field of type F that holds a key's T.
type configField[T, F any] struct {
	at   func(c *Config) *F
	conv func(v T) F // the field's value for v
	// present, when set, is a flag raised with each value put.
	present func(c *Config) *bool
}

// put sets the field to v's value, raising present.
func (f configField[T, F]) put(c *Config, v T) {
	*f.at(c) = f.conv(v)
	if f.present != nil {
		*f.present(c) = true
	}
}

// field is a Config field of the key's own type.
func field[T any](at func(c *Config) *T) store[T] {
	return configField[T, T]{at: at, conv: sameValue[T]}
}

// fieldAs is a Config field of another type than the key's, and how a
// value of the key becomes one.
func fieldAs[T, F any](at func(c *Config) *F, conv func(v T) F) store[T] {
	return configField[T, F]{at: at, conv: conv}
}

// limitNotice is the refusal of a raised sandbox limit.
const limitNotice = `{key} {value} is ignored: a project can lower the sandbox's limits, not raise them (yours is {current})`

// keys is the table of configuration keys, in the order of the help
// listing (and of the project's notices).
var keys = []entry{
	&keyOf[string]{key: key{name: "provider", env: "SHIRO_PROVIDER", flag: "--provider",
		doc: "the model provider (openai-compatible: Ollama, vLLM, llama.cpp, OpenRouter)",
		project: projectRule{mode: projectNever, overridable: true,
			notice: `"provider" is ignored: a project cannot send your API key to another provider (yours is {current})`}},
		kind: oneOf(providers...), def: some(DefaultProvider),
		override: func(o *Overrides) **string { return &o.Provider },
		quiet:    func(v, cur string) bool { return v == cur },
		to:       field(func(c *Config) *string { return &c.Provider })},
	&keyOf[string]{key: key{name: "model", env: "SHIRO_MODEL", flag: "--model", defText: "claude-sonnet-5-5 (anthropic), gpt-5 (openai)",
		doc: "the model id"},
		kind:     kString,
		override: func(o *Overrides) **string { return &o.Model },
		to:       field(func(c *Config) *string { return &c.Model })},
	&keyOf[string]{key: key{name: "baseURL", env: "SHIRO_BASE_URL", flag: "--base-url", defText: "the provider's API",
		doc: "the API root (http or https)",
		project: projectRule{mode: projectNever,
			notice: `"baseURL" is ignored: a project cannot send your API key to another server`}},
		kind: kString, check: checkBaseURL,
		override: func(o *Overrides) **string { return &o.BaseURL },
		to:       field(func(c *Config) *string { return &c.BaseURL })},
	&keyOf[string]{key: key{name: "apiKey", env: "SHIRO_API_KEY", defText: "ANTHROPIC_API_KEY or OPENAI_API_KEY, by provider",
		doc: "the API key (never shown)",
		project: projectRule{mode: projectNever,
			notice: `"apiKey" is ignored: a project cannot choose the API key (set it in your user config or SHIRO_API_KEY)`}},
		kind:  kString,
		quiet: func(v, _ string) bool { return v == "" },
		to:    field(func(c *Config) *string { return &c.APIKey })},
	&keyOf[string]{key: key{name: "presetId", defText: "none",
		doc: "the /provider preset the provider was chosen from; a compatible preset's key variable (OPENROUTER_API_KEY, GROQ_API_KEY, DEEPSEEK_API_KEY, XAI_API_KEY) is read while baseURL is the preset's",
		project: projectRule{mode: projectNever,
			notice: `"presetId" is ignored: a project cannot choose which key is sent`}},
		kind: kString,
		to:   field(func(c *Config) *string { return &c.PresetID })},
	&keyOf[string]{key: key{name: "openaiAPI", env: "SHIRO_OPENAI_API", defText: "auto",
		doc: "the OpenAI protocol: auto (chat, responses on the official endpoint), chat, responses"},
		kind: oneOf(openaiAPIs...),
		to:   field(func(c *Config) *string { return &c.OpenAIAPI })},
	&keyOf[int]{key: key{name: "maxRetries",
		doc: "retries on 408, 409, 429, 5xx and connection errors"},
		kind: kInt, def: some(DefaultMaxRetries), check: nonNegative[int],
		to: field(func(c *Config) *int { return &c.MaxRetries })},
	&keyOf[[]string]{key: key{name: "toolSets", defText: "all", doc: "the optional tool sets; empty: core only"},
		kind:     kList,
		override: func(o *Overrides) **[]string { return &o.ToolSets },
		tidy:     (*merger).knownToolSets,
		to: configField[[]string, []string]{at: func(c *Config) *[]string { return &c.ToolSets }, conv: orEmpty,
			present: func(c *Config) *bool { return &c.ToolSetsPresent }}},
	&keyOf[[]string]{key: key{name: "plugins", flag: "--no-plugins",
		doc:     "the built-in plugins: guard, time, bell",
		project: projectRule{mode: projectTighten, notice: `"plugins" cannot turn off the guard: it stays on`, says: "a project keeps the guard"}},
		kind: kList, def: some(DefaultPlugins),
		override: func(o *Overrides) **[]string { return &o.Plugins },
		looser:   func(v, _ []string) bool { return !slices.Contains(v, guardPlugin) },
		repair:   func(v []string) []string { return append([]string{guardPlugin}, v...) },
		to:       field(func(c *Config) *[]string { return &c.Plugins })},
	&keyOf[bool]{key: key{name: "yolo", flag: "--yolo", defText: "false",
		doc:     "skip approval prompts (the guard still runs)",
		project: projectRule{mode: projectTighten, notice: `"yolo" is ignored: a project cannot turn off approvals`, says: "a project may only set false"}},
		kind:     kBool,
		override: func(o *Overrides) **bool { return &o.Yolo },
		looser:   func(v, _ bool) bool { return v },
		to:       field(func(c *Config) *bool { return &c.Yolo })},
	&keyOf[string]{key: key{name: "agent", flag: "--agent",
		doc: "the agent variant"},
		kind: oneOf(agent.VariantNames()...), def: some(agent.DefaultVariant),
		override:  func(o *Overrides) **string { return &o.Agent },
		flagCheck: func(v string) error { _, err := agent.ResolveVariant(v, ""); return err },
		to:        field(func(c *Config) *string { return &c.Agent })},
	&keyOf[string]{key: key{name: "thinking", flag: "--think", defText: "the variant's",
		doc: "the thinking level"},
		kind:      oneOf(thinkings...),
		override:  func(o *Overrides) **string { return &o.Thinking },
		flagCheck: func(v string) error { _, err := agent.ParseThinking(v); return err },
		to:        field(func(c *Config) *string { return &c.Thinking })},
	&keyOf[int]{key: key{name: "compactThreshold",
		doc: "estimated tokens above which what is sent is pruned"},
		kind: kInt, def: some(DefaultCompactThreshold), check: positive[int],
		to: field(func(c *Config) *int { return &c.CompactThreshold })},
	&keyOf[string]{key: key{name: "sandbox.image", flag: "--image", defText: "the built-in image",
		doc: `an image reference, a Dockerfile or devcontainer.json, or "devcontainer"`},
		kind:     kString,
		override: func(o *Overrides) **string { return &o.Image },
		to:       field(func(c *Config) *string { return &c.Sandbox.Image })},
	&keyOf[string]{key: key{name: "sandbox.network", flag: "--network",
		doc: "ask (each host through shiro's proxy), open (bridge), none",
		project: projectRule{mode: projectTighten, overridable: true,
			notice: `{key} {value} is ignored: a project can narrow the sandbox network, not widen it (yours is {current})`}},
		kind: oneOf(networks...), def: some(NetworkAsk),
		override: func(o *Overrides) **string { return &o.Network },
		looser:   func(v, cur string) bool { return networkRank(v) > networkRank(cur) },
		to:       fieldAs(func(c *Config) *string { return &c.Sandbox.Network }, bridgeIsOpen)},
	&keyOf[string]{key: key{name: "sandbox.memory", flag: "--memory",
		doc:     "the memory limit: 512m, 4g",
		project: projectRule{mode: projectTighten, notice: limitNotice, says: "a project may only lower it"}},
		kind:     kSize,
		check:    func(label string, v string) error { _, err := checkMemory(label, v); return err },
		override: func(o *Overrides) **string { return &o.Memory },
		base:     some(strconv.FormatInt(sandbox.DefaultMemory>>30, 10) + "g"),
		looser:   func(v, cur string) bool { return memoryOf(v) > memoryOf(cur) },
		to:       fieldAs(func(c *Config) *int64 { return &c.Sandbox.Memory }, memoryOf)},
	&keyOf[float64]{key: key{name: "sandbox.cpus", flag: "--cpus",
		doc:     "the CPU limit",
		project: projectRule{mode: projectTighten, notice: limitNotice, says: "a project may only lower it"}},
		kind: kFloat, check: positive[float64],
		override: func(o *Overrides) **float64 { return &o.CPUs },
		base:     some(float64(sandbox.DefaultCPUs)),
		looser:   func(v, cur float64) bool { return v > cur },
		to:       field(func(c *Config) *float64 { return &c.Sandbox.CPUs })},
	&keyOf[int64]{key: key{name: "sandbox.pids", flag: "--pids",
		doc:     "the process limit",
		project: projectRule{mode: projectTighten, notice: limitNotice, says: "a project may only lower it"}},
		kind: kInt64, check: positive[int64],
		override: func(o *Overrides) **int64 { return &o.Pids },
		base:     some(int64(sandbox.DefaultPids)),
		looser:   func(v, cur int64) bool { return v > cur },
		to:       field(func(c *Config) *int64 { return &c.Sandbox.Pids })},
	&keyOf[[]string]{key: key{name: "sandbox.env", flag: "--env", defText: "none",
		doc: "environment of the sandbox: NAME (the host's value) or NAME=value; sources add up",
		project: projectRule{mode: projectTighten, says: "a project may add NAME=value only",
			notice: `{key} entry {value} is ignored: a project cannot pass host environment variables into the sandbox (NAME=value constants are allowed)`}},
		kind: kEnvList, check: checkEnvEntries,
		entries: func(o *Overrides) *[]string { return &o.Env },
		narrow:  constantsOnly,
		to:      fieldAs(func(c *Config) *[]string { return &c.Sandbox.Env }, dedupeEnv)},
	&keyOf[[]string]{key: key{name: "sandbox.buildSecrets", flag: "--build-secret", defText: "none",
		doc: "secrets a Dockerfile build's RUN --mount=type=secret steps get: id=NAME,env=VAR or id=NAME,src=FILE; sources add up",
		project: projectRule{mode: projectNever,
			notice: `"sandbox.buildSecrets" is ignored: a project cannot ask for your secrets in its build (give them in your user config or with --build-secret)`}},
		kind: kEnvList, check: checkBuildSecrets,
		entries: func(o *Overrides) *[]string { return &o.BuildSecrets },
		quiet:   func(v, _ []string) bool { return len(v) == 0 },
		to:      field(func(c *Config) *[]string { return &c.Sandbox.BuildSecrets })},
	&keyOf[bool]{key: key{name: "sandbox.noSandbox", flag: "--no-sandbox", defText: "false",
		doc:     "run commands on the host, without isolation",
		project: projectRule{mode: projectTighten, notice: `"sandbox.noSandbox" is ignored: a project cannot turn off the sandbox`, says: "a project may only set false"}},
		kind:     kBool,
		override: func(o *Overrides) **bool { return &o.NoSandbox },
		looser:   func(v, _ bool) bool { return v },
		to:       field(func(c *Config) *bool { return &c.Sandbox.NoSandbox })},
	&keyOf[string]{key: key{name: "sandbox.backend", flag: "--backend", defText: sandbox.DefaultBackend,
		doc:     "where sandboxes run: one of the sandbox backends",
		project: projectRule{mode: projectNever, notice: `"sandbox.backend" is ignored: where sandboxes run is yours to choose, not the project's`}},
		kind:     oneOfNow(sandbox.Backends),
		override: func(o *Overrides) **string { return &o.Backend },
		to:       field(func(c *Config) *string { return &c.Sandbox.Backend })},
	&keyOf[string]{key: key{name: "sandbox.workspace", flag: "--workspace",
		defText: "mount on a local Docker engine, copy otherwise",
		doc:     "mount (the sandbox writes the workspace) or copy (it writes a copy; /apply brings its changes back)",
		project: projectRule{mode: projectTighten, overridable: true, says: "a project may only ask for copy",
			notice: `{key} {value} is ignored: a project can ask for a copy of the workspace, not for the workspace itself`}},
		kind:     oneOf(sandbox.WorkspaceMount, sandbox.WorkspaceCopy),
		override: func(o *Overrides) **string { return &o.WorkspaceMode },
		base:     some(""),
		looser:   func(v, _ string) bool { return v == sandbox.WorkspaceMount },
		to:       field(func(c *Config) *string { return &c.Sandbox.WorkspaceMode })},
	&keyOf[string]{key: key{name: "sandbox.kubeContext", flag: "--kube-context", defText: "the kubeconfig's current context",
		doc:     "the Kubernetes context of the kubernetes backend",
		project: projectRule{mode: projectNever, notice: `"sandbox.kubeContext" is ignored: which cluster runs sandboxes is yours to choose, not the project's`}},
		kind:     kString,
		override: func(o *Overrides) **string { return &o.KubeContext },
		to:       field(func(c *Config) *string { return &c.Sandbox.KubeContext })},
	&keyOf[string]{key: key{name: "sandbox.namespace", flag: "--namespace", defText: "the context's namespace",
		doc:     "the Kubernetes namespace of the kubernetes backend",
		project: projectRule{mode: projectNever, notice: `"sandbox.namespace" is ignored: which namespace runs sandboxes is yours to choose, not the project's`}},
		kind:     kString,
		override: func(o *Overrides) **string { return &o.Namespace },
		to:       field(func(c *Config) *string { return &c.Sandbox.Namespace })},
	&keyOf[string]{key: key{name: "sandbox.kubernetes.storageClass", flag: "--storage-class", defText: "the cluster's default StorageClass",
		doc:     "the StorageClass of the workspace's claim on the kubernetes backend",
		project: projectRule{mode: projectNever, notice: `"sandbox.kubernetes.storageClass" is ignored: which storage holds your sandboxes is yours to choose, not the project's`}},
		kind:     kString,
		override: func(o *Overrides) **string { return &o.StorageClass },
		to:       field(func(c *Config) *string { return &c.Sandbox.StorageClass })},
	&keyOf[string]{key: key{name: "sandbox.kubernetes.imagePullSecret", flag: "--image-pull-secret", defText: "none",
		doc:     "an existing secret of the namespace that the nodes pull the pod's image with on the kubernetes backend",
		project: projectRule{mode: projectNever, notice: `"sandbox.kubernetes.imagePullSecret" is ignored: which secrets your pods use is yours to choose, not the project's`}},
		kind:     kString,
		override: func(o *Overrides) **string { return &o.ImagePullSecret },
		to:       field(func(c *Config) *string { return &c.Sandbox.ImagePullSecret })},
	&keyOf[[]string]{key: key{name: "sandbox.publish", flag: "--publish", defText: "none",
		doc: "ports carried from the host to the sandbox: HOST_PORT:CONTAINER_PORT or PORT; sources add up",
		project: projectRule{mode: projectNever,
			notice: `"sandbox.publish" is ignored: a project cannot open ports on your machine (publish them in your user config, with --publish or /ports)`}},
		kind: kEnvList, check: checkPublish,
		entries: func(o *Overrides) *[]string { return &o.Publish },
		quiet:   func(v, _ []string) bool { return len(v) == 0 },
		to:      fieldAs(func(c *Config) *[]string { return &c.Sandbox.Publish }, lastPerHostPort)},
	&keyOf[string]{key: key{name: "sandbox.publishAddress", flag: "--publish-address", defText: publish.DefaultAddress,
		doc: "the host address published ports listen on (anything but loopback is reachable from other machines)",
		project: projectRule{mode: projectNever,
			notice: `"sandbox.publishAddress" is ignored: where your machine listens is yours to choose, not the project's`}},
		kind: kString, check: checkPublishAddress,
		override: func(o *Overrides) **string { return &o.PublishAddress },
		to:       field(func(c *Config) *string { return &c.Sandbox.PublishAddress })},
	&keyOf[[]HostRule]{key: key{name: "network.allow", flag: "--allow-host", defText: "none",
		doc: "hosts the egress proxy lets through in ask mode: example.com, *.example.com, host:port",
		project: projectRule{mode: projectNever,
			notice: `"network.allow" is ignored: a project can add denials, not allowances (allow hosts in your user config or with --allow-host)`}},
		kind: kHosts, check: checkHosts,
		entries: func(o *Overrides) *[]string { return &o.AllowHosts },
		quiet:   func(v, _ []HostRule) bool { return len(v) == 0 },
		to:      field(func(c *Config) *[]HostRule { return &c.Network.Allow })},
	&keyOf[[]HostRule]{key: key{name: "network.deny", defText: "none",
		doc: "hosts the egress proxy refuses in ask mode"},
		kind: kHosts, check: checkHosts,
		to: field(func(c *Config) *[]HostRule { return &c.Network.Deny })},
	&keyOf[[]Credential]{key: key{name: "network.credentials", defText: "none",
		doc: "headers the egress proxy adds per host, valued from your environment or a command; never in the sandbox",
		project: projectRule{mode: projectNever,
			notice: `"network.credentials" is ignored: a project cannot name credentials (set them in your user config)`}},
		kind: kCredentials,
		to:   field(func(c *Config) *[]Credential { return &c.Network.Credentials })},
	&keyOf[map[string]json.RawMessage]{key: key{name: "mcpServers", defText: "none",
		doc: "MCP servers by name (a project's run in the sandbox)"},
		kind:  kServers,
		apart: field(func(c *Config) *map[string]json.RawMessage { return &c.ProjectMCPServers }),
		to:    field(func(c *Config) *map[string]json.RawMessage { return &c.MCPServers })},
	&keyOf[[]string]{key: key{name: "trust.paths", want: "a list of paths or glob patterns", defText: "none",
		doc: "workspaces whose project asks need no question: paths or glob patterns",
		project: projectRule{mode: projectNever, noticeKey: "trust",
			notice: `"trust" is ignored: a project cannot trust itself`}},
		kind: kList,
		to:   field(func(c *Config) *[]string { return &c.TrustPaths })},
	&keyOf[string]{key: key{name: "worktrees.dir", want: "an absolute path or a ~/ path", defText: "<data dir>/worktrees",
		doc: "the folder of --worktree agents' worktrees (one folder per repository inside it)",
		project: projectRule{mode: projectNever,
			notice: `"worktrees.dir" is ignored: where shiro makes worktrees on your machine is yours to choose, not the project's`}},
		kind: kString, check: checkWorktreesDir,
		to: field(func(c *Config) *string { return &c.WorktreesDir })},
}

// keyNamed is the key of a dotted name, or nil.
func keyNamed(name string) entry {
	for _, e := range keys {
		if e.meta().name == name {
			return e
		}
	}
	return nil
}

// children are the names one level below path ("" for the top) that
// keys or groups of keys have, in table order.
func children(path string) []string {
	var out []string
	for _, e := range keys {
		name := e.meta().name
		rest, ok := strings.CutPrefix(name, path+".")
		if path == "" {
			rest, ok = name, true
		}
		if !ok {
			continue
		}
		rest, _, _ = strings.Cut(rest, ".")
		if !slices.Contains(out, rest) {
			out = append(out, rest)
		}
	}
	return out
}

// KeyDoc describes one configuration key for a help listing.
type KeyDoc struct {
	// Name is the dotted key: "sandbox.memory".
	Name string
	// Kind is its type (string, whole number, number, true/false, list,
	// object), with the accepted values of a string that has a fixed set.
	Kind    string
	Default string
	Doc     string
	// Env and Flag are the environment variable and the flag that set it
	// ("" for none).
	Env, Flag string
	// Project says what a project's file may not do ("" when it may set
	// the key like the user).
	Project string
}

// Keys lists the configuration keys in the order of the table.
func Keys() []KeyDoc {
	out := make([]KeyDoc, 0, len(keys))
	for _, e := range keys {
		k, info := e.meta(), e.kindInfo()
		d := KeyDoc{Name: k.name, Kind: info.name, Default: e.helpDefault(), Doc: k.doc, Env: k.env, Flag: k.flag, Project: k.project.says}
		if info.values != nil {
			d.Kind = strings.Join(info.values(), "|")
		}
		if d.Project == "" {
			d.Project = map[projectMode]string{projectNever: "not from a project", projectTighten: "a project may only narrow it"}[k.project.mode]
		}
		out = append(out, d)
	}
	return out
}

// Value checks shared by files (label `"key"`), the environment
// (SHIRO_X) and flags (--x).

func checkOneOf(label, v string, valid []string) error {
	if slices.Contains(valid, v) {
		return nil
	}
	return fmt.Errorf("%s must be one of %s (got %q)", label, strings.Join(valid, ", "), v)
}

// number is the type of a numeric key.
type number interface{ ~int | ~int64 | ~float64 }

// positive accepts a number above 0.
func positive[N number](label string, n N) error {
	if n > 0 {
		return nil
	}
	return fmt.Errorf("%s must be more than 0", label)
}

// nonNegative accepts 0 and above.
func nonNegative[N number](label string, n N) error {
	if n >= 0 {
		return nil
	}
	return fmt.Errorf("%s must be 0 or more", label)
}

// checkBaseURL accepts an absolute http or https URL. The URL is not quoted
// back: it may carry credentials.
func checkBaseURL(label string, v string) error {
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

// memoryOf is a checked size in bytes.
func memoryOf(v string) int64 {
	n, _ := checkMemory("", v) // checked when read
	return n
}

// checkEnvEntries accepts NAME and NAME=value. Only the name is quoted back.
// checkBuildSecrets checks build secret entries (sandbox.ParseBuildSecret).
func checkBuildSecrets(label string, entries []string) error {
	if _, err := sandbox.ParseBuildSecrets(entries); err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	return nil
}

// checkWorktreesDir checks the folder of worktree agents: absolute or
// under ~/ (the front end expands it).
func checkWorktreesDir(label, dir string) error {
	if dir == "" || filepath.IsAbs(dir) || strings.HasPrefix(dir, "~/") {
		return nil
	}
	return fmt.Errorf("%s: %q is not an absolute path or a ~/ path", label, dir)
}

// checkPublish checks port mappings (publish.ParseMappings).
func checkPublish(label string, entries []string) error {
	if _, err := publish.ParseMappings(entries); err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	return nil
}

// checkPublishAddress checks the host address of published ports.
func checkPublishAddress(label string, addr string) error {
	if _, err := publish.CheckAddress(addr); err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	return nil
}

// lastPerHostPort keeps the last mapping of each host port (a later
// source's), in the order of those last ones.
func lastPerHostPort(entries []string) []string {
	hostPort := func(e string) string {
		if m, err := publish.ParseMapping(e); err == nil {
			return strconv.Itoa(m.HostPort)
		}
		return e
	}
	last := map[string]int{}
	for i, e := range entries {
		last[hostPort(e)] = i
	}
	var out []string
	for i, e := range entries {
		if last[hostPort(e)] == i {
			out = append(out, e)
		}
	}
	return out
}

func checkEnvEntries(label string, entries []string) error {
	for i, e := range entries {
		name, _, _ := strings.Cut(e, "=")
		if name == "" || strings.ContainsAny(name, " \t\r\n") {
			return fmt.Errorf("%s entry %d (%q) must be NAME or NAME=value", label, i+1, name)
		}
	}
	return nil
}

// constantsOnly keeps the NAME=value entries a project may add; the NAME
// entries, which would pass the host's variables in, are loose.
func constantsOnly(entries []string) (kept, loose []string) {
	for _, e := range entries {
		if strings.Contains(e, "=") {
			kept = append(kept, e)
		} else {
			loose = append(loose, e)
		}
	}
	return kept, loose
}

// checkHosts accepts a list of egress host patterns.
func checkHosts(label string, rules []HostRule) error {
	for _, r := range rules {
		if _, err := egress.ParsePattern(r.Pattern); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
	}
	return nil
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

// bridgeIsOpen reads the network mode "bridge" as open.
func bridgeIsOpen(n string) string {
	if n == NetworkBridge {
		return NetworkOpen
	}
	return n
}

// orEmpty is an empty list for nil: a set key with no entries.
func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
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
