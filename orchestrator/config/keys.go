package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// key is one configuration key: everything that parsing, the environment,
// the flags, merging, the project refusals and the help listing know of
// it. A new key is an entry in keys (with its Config field, and its
// Overrides field when it has a flag) and its sample in keys_test.go.
type key struct {
	name string // the dotted path in the files: "sandbox.memory"
	kind *kind
	want string // what a file's value must be, in errors; "" is the kind's
	doc  string // one line for the help listing
	// values are the accepted values of a string key; checked in every
	// source.
	values []string
	// check validates a value from any source; label names the source
	// (`"key"`, SHIRO_X, --x) and starts the message.
	check func(label string, v any) error
	// def is the value when no source sets one (nil: Config's zero);
	// defText is the default as the help shows it when def does not say it.
	def     any
	defText string
	env     string // the environment variable; "" for none
	flag    string // the command-line flag; "" for none
	// override points at the flag's field in Overrides: a **T, or a
	// *[]string whose entries add to the configured ones.
	override func(o *Overrides) any
	// flagCheck replaces check for the flag's value.
	flagCheck func(v any) error
	project   projectRule
	// tidy adjusts a value from any source before it is merged.
	tidy func(m *merger, file string, v any) any
	// field points at the key's place in Config; conv turns the merged
	// value into the field's type; set replaces both.
	field func(c *Config) any
	conv  func(v any) any
	set   func(c *Config, v any)
}

// projectMode is what the project file may do with a key.
type projectMode int

const (
	projectMay     projectMode = iota // set it like any other source
	projectNever                      // nothing: the value is dropped, with the notice unless quiet
	projectTighten                    // narrow it: a value looser than the current one is refused
)

// projectRule is how the untrusted project file is held to a key.
type projectRule struct {
	mode projectMode
	// notice is the refusal's text: {key} is the quoted key, {value} the
	// project's value (or entry), {current} the value it is held to.
	notice    string
	noticeKey string // the notice's Key when not the key's name
	// quiet (never) says the value needs no notice; it is dropped anyway.
	quiet func(v, current any) bool
	// looser (tighten) says v widens current.
	looser func(v, current any) bool
	// base (tighten) is current when no source set the key and it has no def.
	base any
	// each (tighten): looser judges each entry of a list; loose entries go.
	each bool
	// repair (tighten) makes a loose value safe instead of dropping it.
	repair func(v any) any
	// overridable: when the environment or a flag sets the key the
	// project's value would not count; it is dropped without a notice.
	overridable bool
	// says what a project may do, for the help ("" is the mode's own words).
	says string
	// apart: the project's value goes to projectField, not merged.
	apart        bool
	projectField func(c *Config) any
}

// kind is a key's type: how a value is read and merged.
type kind struct {
	name string // in the help listing
	want string // what the value must be: "a whole number"
	json string // the JSON kind that holds it: "a number"
	// decode reads a JSON value (nil, nil for null); parse replaces it
	// where nested values need their own positions.
	decode func(raw []byte) (any, error)
	parse  func(p *parser, m member) (any, error)
	// merge combines the merged value with a source's (nil: replace);
	// source names where the value comes from.
	merge func(prev, v any, source string) any
}

func decodeAs[T any](raw []byte) (any, error) {
	var p *T
	if err := json.Unmarshal(raw, &p); err != nil || p == nil {
		return nil, err
	}
	return *p, nil
}

var (
	kString  = &kind{name: "string", want: "a string", json: "a string", decode: decodeAs[string]}
	kSize    = &kind{name: "size", want: "a string", json: "a string", decode: decodeAs[string]}
	kInt     = &kind{name: "whole number", want: "a whole number", json: "a number", decode: decodeAs[int]}
	kInt64   = &kind{name: "whole number", want: "a whole number", json: "a number", decode: decodeAs[int64]}
	kFloat   = &kind{name: "number", want: "a number", json: "a number", decode: decodeAs[float64]}
	kBool    = &kind{name: "true/false", want: "true or false", json: "a boolean", decode: decodeAs[bool]}
	kList    = &kind{name: "list", want: "a list of strings", json: "an array", decode: decodeAs[[]string]}
	kEnvList = &kind{name: "list", want: "a list of strings", json: "an array", decode: decodeAs[[]string],
		merge: func(prev, v any, _ string) any { return append(listOf[string](prev), v.([]string)...) }}
	kHosts = &kind{name: "list", want: "a list of host patterns", json: "an array", decode: decodeAs[[]string],
		merge: func(prev, v any, source string) any {
			rules := listOf[HostRule](prev)
			for _, p := range v.([]string) {
				c, _ := egress.ParsePattern(p) // checked when read
				rules = append(rules, HostRule{Pattern: c, Source: source})
			}
			return rules
		}}
	kServers = &kind{name: "object", want: "an object", json: "an object", parse: parseServers}
	// kCredentials is network.credentials: each entry named by its place.
	kCredentials = &kind{name: "list", want: `a list of {"host", "header", "env" or "command"}`, json: "an array", parse: parseCredentialsKey,
		merge: func(_, v any, source string) any {
			name, file, _ := strings.Cut(source, " in ")
			cs := listOf[Credential](v)
			for i := range cs {
				cs[i].Source = fmt.Sprintf("%s[%d] in %s", name, i, file)
			}
			return cs
		}}
)

// parseCredentialsKey reads network.credentials (parseCredentials checks
// each entry).
func parseCredentialsKey(p *parser, m member) (any, error) {
	if isNull(m.raw) {
		return nil, nil
	}
	cs, err := parseCredentials(m.raw)
	if err != nil {
		return nil, p.errorAt(m.off, m.key, err)
	}
	return cs, nil
}

// listOf is a merged list value, cloned (nil when unset).
func listOf[T any](v any) []T {
	l, _ := v.([]T)
	return slices.Clone(l)
}

// parseServers reads mcpServers: an object of objects.
func parseServers(p *parser, m member) (any, error) {
	if isNull(m.raw) {
		return nil, nil
	}
	members, err := p.object(m, m.key)
	if err != nil {
		return nil, err
	}
	servers := map[string]json.RawMessage{}
	for _, sm := range members {
		if _, err := p.object(sm, sm.key); err != nil {
			return nil, err
		}
		servers[strings.TrimPrefix(sm.key, m.key+".")] = sm.raw
	}
	return servers, nil
}

// field points a key at a Config field.
func field[T any](f func(c *Config) *T) func(c *Config) any {
	return func(c *Config) any { return f(c) }
}

// flagField points a key at an Overrides field.
func flagField[T any](f func(o *Overrides) T) func(o *Overrides) any {
	return func(o *Overrides) any { return f(o) }
}

// limitNotice is the refusal of a raised sandbox limit.
const limitNotice = `{key} {value} is ignored: a project can lower the sandbox's limits, not raise them (yours is {current})`

// keys is the table of configuration keys, in the order of the help
// listing (and of the project's notices).
var keys = []*key{
	{name: "provider", kind: kString, values: providers, def: DefaultProvider, env: "SHIRO_PROVIDER", flag: "--provider",
		override: flagField(func(o *Overrides) **string { return &o.Provider }),
		doc:      "the model provider (openai-compatible: Ollama, vLLM, llama.cpp, OpenRouter)",
		project: projectRule{mode: projectNever, overridable: true,
			notice: `"provider" is ignored: a project cannot send your API key to another provider (yours is {current})`,
			quiet:  func(v, cur any) bool { return v == cur }},
		field: field(func(c *Config) *string { return &c.Provider })},
	{name: "model", kind: kString, env: "SHIRO_MODEL", flag: "--model", defText: "claude-sonnet-5-5 (anthropic), gpt-5 (openai)",
		override: flagField(func(o *Overrides) **string { return &o.Model }),
		doc:      "the model id",
		field:    field(func(c *Config) *string { return &c.Model })},
	{name: "baseURL", kind: kString, env: "SHIRO_BASE_URL", flag: "--base-url", defText: "the provider's API",
		check:    checkBaseURL,
		override: flagField(func(o *Overrides) **string { return &o.BaseURL }),
		doc:      "the API root (http or https)",
		project: projectRule{mode: projectNever,
			notice: `"baseURL" is ignored: a project cannot send your API key to another server`},
		field: field(func(c *Config) *string { return &c.BaseURL })},
	{name: "apiKey", kind: kString, env: "SHIRO_API_KEY", defText: "ANTHROPIC_API_KEY or OPENAI_API_KEY, by provider",
		doc: "the API key (never shown)",
		project: projectRule{mode: projectNever,
			notice: `"apiKey" is ignored: a project cannot choose the API key (set it in your user config or SHIRO_API_KEY)`,
			quiet:  func(v, _ any) bool { return v == "" }},
		field: field(func(c *Config) *string { return &c.APIKey })},
	{name: "openaiAPI", kind: kString, values: openaiAPIs, env: "SHIRO_OPENAI_API", defText: "auto",
		doc:   "the OpenAI protocol: auto (chat, responses on the official endpoint), chat, responses",
		field: field(func(c *Config) *string { return &c.OpenAIAPI })},
	{name: "maxRetries", kind: kInt, def: DefaultMaxRetries,
		check: nonNegative,
		doc:   "retries on 408, 409, 429, 5xx and connection errors",
		field: field(func(c *Config) *int { return &c.MaxRetries })},
	{name: "toolSets", kind: kList, defText: "all", doc: "the optional tool sets; empty: core only",
		override: flagField(func(o *Overrides) **[]string { return &o.ToolSets }),
		tidy:     (*merger).knownToolSets,
		field:    field(func(c *Config) *[]string { return &c.ToolSets }),
		set: func(c *Config, v any) {
			c.ToolSets, c.ToolSetsPresent = slices.Clone(v.([]string)), true
			if c.ToolSets == nil {
				c.ToolSets = []string{}
			}
		}},
	{name: "plugins", kind: kList, def: DefaultPlugins, flag: "--no-plugins",
		override: flagField(func(o *Overrides) **[]string { return &o.Plugins }),
		doc:      "the built-in plugins: guard, time, bell",
		project: projectRule{mode: projectTighten, notice: `"plugins" cannot turn off the guard: it stays on`, says: "a project keeps the guard",
			looser: func(v, _ any) bool { return !slices.Contains(v.([]string), guardPlugin) },
			repair: func(v any) any { return append([]string{guardPlugin}, v.([]string)...) }},
		field: field(func(c *Config) *[]string { return &c.Plugins })},
	{name: "yolo", kind: kBool, flag: "--yolo", defText: "false",
		override: flagField(func(o *Overrides) **bool { return &o.Yolo }),
		doc:      "skip approval prompts (the guard still runs)",
		project: projectRule{mode: projectTighten, notice: `"yolo" is ignored: a project cannot turn off approvals`, says: "a project may only set false",
			looser: func(v, _ any) bool { return v.(bool) }},
		field: field(func(c *Config) *bool { return &c.Yolo })},
	{name: "agent", kind: kString, values: agent.VariantNames(), def: agent.DefaultVariant, flag: "--agent",
		override:  flagField(func(o *Overrides) **string { return &o.Agent }),
		flagCheck: func(v any) error { _, err := agent.ResolveVariant(v.(string), ""); return err },
		doc:       "the agent variant",
		field:     field(func(c *Config) *string { return &c.Agent })},
	{name: "thinking", kind: kString, values: thinkings, flag: "--think", defText: "the variant's",
		override:  flagField(func(o *Overrides) **string { return &o.Thinking }),
		flagCheck: func(v any) error { _, err := agent.ParseThinking(v.(string)); return err },
		doc:       "the thinking level",
		field:     field(func(c *Config) *string { return &c.Thinking })},
	{name: "compactThreshold", kind: kInt, def: DefaultCompactThreshold, check: positive,
		doc:   "estimated tokens above which what is sent is pruned",
		field: field(func(c *Config) *int { return &c.CompactThreshold })},
	{name: "sandbox.image", kind: kString, flag: "--image", defText: "the built-in image",
		override: flagField(func(o *Overrides) **string { return &o.Image }),
		doc:      `an image reference, a Dockerfile or devcontainer.json, or "devcontainer"`,
		field:    field(func(c *Config) *string { return &c.Sandbox.Image })},
	{name: "sandbox.network", kind: kString, values: networks, def: NetworkAsk, flag: "--network",
		override: flagField(func(o *Overrides) **string { return &o.Network }),
		doc:      "ask (each host through shiro's proxy), open (bridge), none",
		project: projectRule{mode: projectTighten, overridable: true,
			notice: `{key} {value} is ignored: a project can narrow the sandbox network, not widen it (yours is {current})`,
			looser: func(v, cur any) bool { return networkRank(v.(string)) > networkRank(cur.(string)) }},
		field: field(func(c *Config) *string { return &c.Sandbox.Network }),
		conv: func(v any) any {
			if v == NetworkBridge {
				return NetworkOpen
			}
			return v
		}},
	{name: "sandbox.memory", kind: kSize, flag: "--memory",
		check:    func(label string, v any) error { _, err := checkMemory(label, v.(string)); return err },
		override: flagField(func(o *Overrides) **string { return &o.Memory }),
		doc:      "the memory limit: 512m, 4g",
		project: projectRule{mode: projectTighten, notice: limitNotice, says: "a project may only lower it",
			base:   strconv.FormatInt(sandbox.DefaultMemory>>30, 10) + "g",
			looser: func(v, cur any) bool { return memoryOf(v) > memoryOf(cur) }},
		field: field(func(c *Config) *int64 { return &c.Sandbox.Memory }),
		conv:  func(v any) any { return memoryOf(v) }},
	{name: "sandbox.cpus", kind: kFloat, flag: "--cpus", check: positive,
		override: flagField(func(o *Overrides) **float64 { return &o.CPUs }),
		doc:      "the CPU limit",
		project: projectRule{mode: projectTighten, notice: limitNotice, says: "a project may only lower it", base: float64(sandbox.DefaultCPUs),
			looser: func(v, cur any) bool { return v.(float64) > cur.(float64) }},
		field: field(func(c *Config) *float64 { return &c.Sandbox.CPUs })},
	{name: "sandbox.pids", kind: kInt64, flag: "--pids", check: positive,
		override: flagField(func(o *Overrides) **int64 { return &o.Pids }),
		doc:      "the process limit",
		project: projectRule{mode: projectTighten, notice: limitNotice, says: "a project may only lower it", base: int64(sandbox.DefaultPids),
			looser: func(v, cur any) bool { return v.(int64) > cur.(int64) }},
		field: field(func(c *Config) *int64 { return &c.Sandbox.Pids })},
	{name: "sandbox.env", kind: kEnvList, flag: "--env", defText: "none",
		check:    func(label string, v any) error { return checkEnvEntries(label, v.([]string)) },
		override: flagField(func(o *Overrides) *[]string { return &o.Env }),
		doc:      "environment of the sandbox: NAME (the host's value) or NAME=value; sources add up",
		project: projectRule{mode: projectTighten, each: true, says: "a project may add NAME=value only",
			notice: `{key} entry {value} is ignored: a project cannot pass host environment variables into the sandbox (NAME=value constants are allowed)`,
			looser: func(e, _ any) bool { return !strings.Contains(e.(string), "=") }},
		field: field(func(c *Config) *[]string { return &c.Sandbox.Env }),
		conv:  func(v any) any { return dedupeEnv(v.([]string)) }},
	{name: "sandbox.noSandbox", kind: kBool, flag: "--no-sandbox", defText: "false",
		override: flagField(func(o *Overrides) **bool { return &o.NoSandbox }),
		doc:      "run commands on the host, without isolation",
		project: projectRule{mode: projectTighten, notice: `"sandbox.noSandbox" is ignored: a project cannot turn off the sandbox`, says: "a project may only set false",
			looser: func(v, _ any) bool { return v.(bool) }},
		field: field(func(c *Config) *bool { return &c.Sandbox.NoSandbox })},
	{name: "sandbox.backend", kind: kString, values: []string{sandbox.BackendDocker, sandbox.BackendKubernetes}, flag: "--backend", defText: sandbox.BackendDocker,
		override: flagField(func(o *Overrides) **string { return &o.Backend }),
		doc:      "where sandboxes run: docker or kubernetes",
		project:  projectRule{mode: projectNever, notice: `"sandbox.backend" is ignored: where sandboxes run is yours to choose, not the project's`},
		field:    field(func(c *Config) *string { return &c.Sandbox.Backend })},
	{name: "sandbox.workspace", kind: kString, values: []string{sandbox.WorkspaceMount, sandbox.WorkspaceCopy}, flag: "--workspace",
		defText:  "mount on a local Docker engine, copy otherwise",
		override: flagField(func(o *Overrides) **string { return &o.WorkspaceMode }),
		doc:      "mount (the sandbox writes the workspace) or copy (it writes a copy; /apply brings its changes back)",
		project: projectRule{mode: projectTighten, overridable: true, says: "a project may only ask for copy",
			notice: `{key} {value} is ignored: a project can ask for a copy of the workspace, not for the workspace itself`,
			base:   "",
			looser: func(v, _ any) bool { return v.(string) == sandbox.WorkspaceMount }},
		field: field(func(c *Config) *string { return &c.Sandbox.WorkspaceMode })},
	{name: "sandbox.kubeContext", kind: kString, flag: "--kube-context", defText: "the kubeconfig's current context",
		override: flagField(func(o *Overrides) **string { return &o.KubeContext }),
		doc:      "the Kubernetes context of the kubernetes backend",
		project:  projectRule{mode: projectNever, notice: `"sandbox.kubeContext" is ignored: which cluster runs sandboxes is yours to choose, not the project's`},
		field:    field(func(c *Config) *string { return &c.Sandbox.KubeContext })},
	{name: "sandbox.namespace", kind: kString, flag: "--namespace", defText: "the context's namespace",
		override: flagField(func(o *Overrides) **string { return &o.Namespace }),
		doc:      "the Kubernetes namespace of the kubernetes backend",
		project:  projectRule{mode: projectNever, notice: `"sandbox.namespace" is ignored: which namespace runs sandboxes is yours to choose, not the project's`},
		field:    field(func(c *Config) *string { return &c.Sandbox.Namespace })},
	{name: "sandbox.kubernetes.storageClass", kind: kString, flag: "--storage-class", defText: "the cluster's default StorageClass",
		override: flagField(func(o *Overrides) **string { return &o.StorageClass }),
		doc:      "the StorageClass of the workspace's claim on the kubernetes backend",
		project:  projectRule{mode: projectNever, notice: `"sandbox.kubernetes.storageClass" is ignored: which storage holds your sandboxes is yours to choose, not the project's`},
		field:    field(func(c *Config) *string { return &c.Sandbox.StorageClass })},
	{name: "network.allow", kind: kHosts, flag: "--allow-host", defText: "none", check: checkHosts,
		override: flagField(func(o *Overrides) *[]string { return &o.AllowHosts }),
		doc:      "hosts the egress proxy lets through in ask mode: example.com, *.example.com, host:port",
		project: projectRule{mode: projectNever,
			notice: `"network.allow" is ignored: a project can add denials, not allowances (allow hosts in your user config or with --allow-host)`,
			quiet:  func(v, _ any) bool { return len(v.([]string)) == 0 }},
		field: field(func(c *Config) *[]HostRule { return &c.Network.Allow })},
	{name: "network.deny", kind: kHosts, defText: "none", check: checkHosts,
		doc:   "hosts the egress proxy refuses in ask mode",
		field: field(func(c *Config) *[]HostRule { return &c.Network.Deny })},
	{name: "network.credentials", kind: kCredentials, defText: "none",
		doc: "headers the egress proxy adds per host, valued from your environment or a command; never in the sandbox",
		project: projectRule{mode: projectNever,
			notice: `"network.credentials" is ignored: a project cannot name credentials (set them in your user config)`},
		field: field(func(c *Config) *[]Credential { return &c.Network.Credentials })},
	{name: "mcpServers", kind: kServers, defText: "none",
		doc: "MCP servers by name (a project's run in the sandbox)",
		project: projectRule{apart: true,
			projectField: field(func(c *Config) *map[string]json.RawMessage { return &c.ProjectMCPServers })},
		field: field(func(c *Config) *map[string]json.RawMessage { return &c.MCPServers })},
	{name: "trust.paths", kind: kList, want: "a list of paths or glob patterns", defText: "none",
		doc: "workspaces whose project asks need no question: paths or glob patterns",
		project: projectRule{mode: projectNever, noticeKey: "trust",
			notice: `"trust" is ignored: a project cannot trust itself`},
		field: field(func(c *Config) *[]string { return &c.TrustPaths })},
}

// keyNamed is the key of a dotted name, or nil.
func keyNamed(name string) *key {
	for _, k := range keys {
		if k.name == name {
			return k
		}
	}
	return nil
}

// children are the names one level below path ("" for the top) that
// keys or groups of keys have, in table order.
func children(path string) []string {
	var out []string
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k.name, path+".")
		if path == "" {
			rest, ok = k.name, true
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
	for _, k := range keys {
		d := KeyDoc{Name: k.name, Kind: k.kind.name, Doc: k.doc, Env: k.env, Flag: k.flag, Project: k.project.says}
		if k.values != nil {
			d.Kind = strings.Join(k.values, "|")
		}
		switch {
		case k.defText != "":
			d.Default = k.defText
		case k.def != nil:
			d.Default = show(k.def, false)
		case k.project.base != nil:
			d.Default = show(k.project.base, false)
		}
		if d.Project == "" {
			d.Project = map[projectMode]string{projectNever: "not from a project", projectTighten: "a project may only narrow it"}[k.project.mode]
		}
		out = append(out, d)
	}
	return out
}

// show writes a value in a notice; quote puts strings in quotes.
func show(v any, quote bool) string {
	switch v := v.(type) {
	case string:
		if quote {
			return strconv.Quote(v)
		}
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case []string:
		return strings.Join(v, ", ")
	}
	return fmt.Sprint(v)
}

// Value checks shared by files (label `"key"`), the environment
// (SHIRO_X) and flags (--x).

func checkOneOf(label, v string, valid []string) error {
	if slices.Contains(valid, v) {
		return nil
	}
	return fmt.Errorf("%s must be one of %s (got %q)", label, strings.Join(valid, ", "), v)
}

// number checks a number with ok; what is what it must be.
func number(ok func(n float64) bool, what string) func(label string, v any) error {
	return func(label string, v any) error {
		var n float64
		switch v := v.(type) {
		case int:
			n = float64(v)
		case int64:
			n = float64(v)
		case float64:
			n = v
		}
		if !ok(n) {
			return fmt.Errorf("%s must be %s", label, what)
		}
		return nil
	}
}

var (
	positive    = number(func(n float64) bool { return n > 0 }, "more than 0")
	nonNegative = number(func(n float64) bool { return n >= 0 }, "0 or more")
)

// checkBaseURL accepts an absolute http or https URL. The URL is not quoted
// back: it may carry credentials.
func checkBaseURL(label string, v any) error {
	u, err := url.Parse(v.(string))
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
func memoryOf(v any) int64 {
	n, _ := checkMemory("", v.(string)) // checked when read
	return n
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

// checkHosts accepts a list of egress host patterns.
func checkHosts(label string, v any) error {
	for _, p := range v.([]string) {
		if _, err := egress.ParsePattern(p); err != nil {
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
