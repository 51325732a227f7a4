package config

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// keySample is how TestEveryKeyRoundTrips exercises one key of the table.
type keySample struct {
	// value is the JSON that the user file, the project file, the
	// environment (as text) and the flag set; want is the Config value
	// (at the key's field) that results.
	value string
	want  any
	// A project's refused value: with the user's refusedBase ("" for
	// none), the project's value leaves refusedWant and one notice. A
	// refusedWant says the key is one a project may not set, or only
	// narrow (tight says which): the table must agree.
	refusedBase string
	refusedWant any
	// A narrow-only key's accepted value: with the user's tightBase, the
	// project's tight leaves tightWant and no notice.
	tightBase, tight string
	tightWant        any
}

// keySamples has one sample for each key of the table: a new key needs
// one here.
var keySamples = map[string]keySample{
	"provider":         {value: `"openai"`, want: "openai", refusedWant: "anthropic"},
	"model":            {value: `"m1"`, want: "m1"},
	"baseURL":          {value: `"https://x.example/v1"`, want: "https://x.example/v1", refusedWant: "https://api.anthropic.com/v1"},
	"apiKey":           {value: `"k1"`, want: "k1", refusedWant: ""},
	"presetId":         {value: `"groq"`, want: "groq", refusedWant: ""},
	"openaiAPI":        {value: `"responses"`, want: "responses"},
	"maxRetries":       {value: `7`, want: 7},
	"toolSets":         {value: `["git"]`, want: []string{"git"}},
	"plugins":          {value: `["time"]`, want: []string{"time"}, refusedWant: []string{"guard", "time"}, tight: `["guard", "bell"]`, tightWant: []string{"guard", "bell"}},
	"yolo":             {value: `true`, want: true, refusedWant: false, tightBase: `true`, tight: `false`, tightWant: false},
	"agent":            {value: `"plan"`, want: "plan"},
	"thinking":         {value: `"high"`, want: "high"},
	"compactThreshold": {value: `5000`, want: 5000},
	"sandbox.image":    {value: `"img:1"`, want: "img:1"},
	"sandbox.network": {value: `"open"`, want: "open", refusedBase: `"none"`, refusedWant: "none",
		tightBase: `"open"`, tight: `"ask"`, tightWant: "ask"},
	"sandbox.memory":                  {value: `"8g"`, want: int64(8 << 30), refusedWant: int64(0), tightBase: `"8g"`, tight: `"1g"`, tightWant: int64(1 << 30)},
	"sandbox.cpus":                    {value: `3`, want: 3.0, refusedWant: 0.0, tightBase: `3`, tight: `1.5`, tightWant: 1.5},
	"sandbox.pids":                    {value: `2000`, want: int64(2000), refusedWant: int64(0), tightBase: `2000`, tight: `10`, tightWant: int64(10)},
	"sandbox.env":                     {value: `["TOKEN", "A=1"]`, want: []string{"TOKEN", "A=1"}, refusedWant: []string{"A=1"}, tight: `["B=2"]`, tightWant: []string{"B=2"}},
	"sandbox.noSandbox":               {value: `true`, want: true, refusedWant: false, tightBase: `true`, tight: `false`, tightWant: false},
	"sandbox.backend":                 {value: `"kubernetes"`, want: "kubernetes", refusedWant: ""},
	"sandbox.workspace":               {value: `"mount"`, want: "mount", refusedBase: `"copy"`, refusedWant: "copy", tightBase: `"mount"`, tight: `"copy"`, tightWant: "copy"},
	"sandbox.kubeContext":             {value: `"c1"`, want: "c1", refusedWant: ""},
	"sandbox.namespace":               {value: `"ns1"`, want: "ns1", refusedWant: ""},
	"sandbox.kubernetes.storageClass": {value: `"fast"`, want: "fast", refusedWant: ""},
	"sandbox.buildSecrets":            {value: `["id=tok,env=TOK"]`, want: []string{"id=tok,env=TOK"}, refusedWant: []string(nil)},
	"sandbox.publish":                 {value: `["8080:3000"]`, want: []string{"8080:3000"}, refusedWant: []string(nil)},
	"sandbox.publishAddress":          {value: `"127.0.0.2"`, want: "127.0.0.2", refusedWant: ""},
	"network.allow":                   {value: `["a.example"]`, want: []string{"a.example"}, refusedWant: []string(nil)},
	"network.deny":                    {value: `["a.example"]`, want: []string{"a.example"}},
	"network.credentials": {value: `[{"host": "a.example", "header": "X-Key", "env": "K"}]`,
		want: []Credential{{Host: "a.example", Header: "X-Key", Env: "K"}}, refusedWant: []Credential(nil)},
	"sandbox.kubernetes.imagePullSecret": {value: `"team-registry"`, want: "team-registry", refusedWant: ""},

	"mcpServers":    {value: `{"s": {"command": "x"}}`, want: map[string]json.RawMessage{"s": json.RawMessage(`{"command": "x"}`)}},
	"trust.paths":   {value: `["/srv/*"]`, want: []string{"/srv/*"}, refusedWant: []string(nil)},
	"worktrees.dir": {value: `"/srv/agents"`, want: "/srv/agents", refusedWant: ""},
}

// nest puts value at a dotted key in a JSON document.
func nest(name, value string) string {
	if value == "" {
		return ""
	}
	parts := strings.Split(name, ".")
	doc := value
	for i := len(parts) - 1; i >= 0; i-- {
		doc = `{` + strconv.Quote(parts[i]) + `: ` + doc + `}`
	}
	return doc
}

// probe is what the tests read of a key of the table through its typed
// parts.
type probe interface {
	entry
	// fieldValue is the value at the key's field of c.
	fieldValue(c *Config) any
	// projectField reads the field of a project's value kept apart; nil
	// when the key keeps none apart.
	projectField() func(c *Config) any
	// flagField points at the flag's field in o; nil for no flag.
	flagField(o *Overrides) any
}

func (k *keyOf[T]) fieldValue(c *Config) any { return k.to.(fieldReader).value(c) }

func (k *keyOf[T]) projectField() func(c *Config) any {
	if k.apart == nil {
		return nil
	}
	return k.apart.(fieldReader).value
}

func (k *keyOf[T]) flagField(o *Overrides) any {
	switch {
	case k.override != nil:
		return k.override(o)
	case k.entries != nil:
		return k.entries(o)
	}
	return nil
}

// fieldReader reads the Config field of a store.
type fieldReader interface {
	value(c *Config) any
}

func (f configField[T, F]) value(c *Config) any { return *f.at(c) }

// valueAt reads a key's Config field; host rules are reduced to their
// patterns (their sources are checked in network_test.go).
func valueAt(c Config, at func(*Config) any) any {
	v := at(&c)
	if rules, ok := v.([]HostRule); ok {
		var patterns []string
		for _, r := range rules {
			patterns = append(patterns, r.Pattern)
		}
		return patterns
	}
	if cs, ok := v.([]Credential); ok {
		for i := range cs {
			cs[i].Source = "" // checked in network_test.go
		}
	}
	return v
}

// TestEveryKeyRoundTrips sets each key of the table through the user
// file, the project file (refusals included), its environment variable
// and its flag, and checks what arrives in Config.
func TestEveryKeyRoundTrips(t *testing.T) {
	t.Parallel()
	for name := range keySamples {
		if keyNamed(name) == nil {
			t.Errorf("sample for %q, which is not in the table", name)
		}
	}
	defaults, _, err := fixture{}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range keys {
		k, p := e.meta(), e.(probe)
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			s, ok := keySamples[k.name]
			if !ok {
				t.Fatalf("no sample in keySamples: add one for the new key")
			}
			if reflect.DeepEqual(valueAt(defaults, p.fieldValue), s.want) {
				t.Fatalf("the sample %s is the default: it proves nothing", s.value)
			}
			check := func(path string, fx fixture, at func(*Config) any, want any, notice bool) {
				t.Helper()
				cfg, notices, err := fx.load(t)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if got := valueAt(cfg, at); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %#v, want %#v", path, got, want)
				}
				if !notice {
					if len(notices) != 0 {
						t.Errorf("%s: notices %q", path, notices)
					}
					return
				}
				pattern := regexp.QuoteMeta(projectFileName + ": " + k.project.notice)
				pattern = regexp.MustCompile(`\\\{(key|value|current)\\\}`).ReplaceAllString(pattern, ".+")
				if len(notices) != 1 || !regexp.MustCompile("^"+pattern+"$").MatchString(notices[0]) {
					t.Errorf("%s: notices %q, want one like %q", path, notices, k.project.notice)
				}
			}

			check("user file", fixture{user: nest(k.name, s.value)}, p.fieldValue, s.want, false)

			if refused := s.refusedWant != nil; refused != (k.project.mode != projectMay) || (s.tight != "") != (k.project.mode == projectTighten) {
				t.Fatalf("the table's project rule (mode %d) is not the one the sample expects", k.project.mode)
			}
			project := fixture{project: nest(k.name, s.value)}
			switch k.project.mode {
			case projectMay:
				at := p.fieldValue
				if p.projectField() != nil {
					at = p.projectField()
					check("project file (kept apart)", project, p.fieldValue, valueAt(defaults, p.fieldValue), false)
				}
				check("project file", project, at, s.want, false)
			case projectNever:
				project.user = nest(k.name, s.refusedBase)
				check("project file (refused)", project, p.fieldValue, s.refusedWant, true)
			case projectTighten:
				project.user = nest(k.name, s.refusedBase)
				check("project file (loosened: refused)", project, p.fieldValue, s.refusedWant, true)
				tight := fixture{user: nest(k.name, s.tightBase), project: nest(k.name, s.tight)}
				check("project file (tightened: accepted)", tight, p.fieldValue, s.tightWant, false)
			}

			if k.env != "" {
				text := s.value
				if unquoted, err := strconv.Unquote(text); err == nil {
					text = unquoted
				}
				check("environment", fixture{env: map[string]string{k.env: text}}, p.fieldValue, s.want, false)
			}

			var o Overrides
			if target := p.flagField(&o); target != nil {
				if err := json.Unmarshal([]byte(s.value), target); err != nil {
					t.Fatalf("flag: %v", err)
				}
				check("flag "+k.flag+" (Overrides)", fixture{flags: o}, p.fieldValue, s.want, false)
			}
		})
	}
}

// TestEveryOverrideHasAKey checks that each flag field of Overrides is
// read through the table: once every key has set its field to its
// sample, no field is left unset (JSON lists every field of Overrides,
// which has no tags, null when unset).
func TestEveryOverrideHasAKey(t *testing.T) {
	t.Parallel()
	var o Overrides
	for _, e := range keys {
		k, target := e.meta(), e.(probe).flagField(&o)
		if target == nil {
			if k.flag != "" {
				t.Errorf("%s: flag %s has no Overrides field", k.name, k.flag)
			}
			continue
		}
		if err := json.Unmarshal([]byte(keySamples[k.name].value), target); err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
	}
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for name, v := range fields {
		if string(v) == "null" {
			t.Errorf("Overrides.%s is read by no key of the table", name)
		}
	}
}

func TestKeysListEveryKey(t *testing.T) {
	t.Parallel()
	docs := Keys()
	if len(docs) != len(keys) {
		t.Fatalf("%d docs for %d keys", len(docs), len(keys))
	}
	for i, d := range docs {
		if k := keys[i].meta(); d.Name != k.name || d.Doc == "" || d.Kind == "" || (d.Project == "") != (k.project.mode == projectMay) {
			t.Errorf("incomplete: %+v", d)
		}
	}
	want := KeyDoc{Name: "sandbox.memory", Kind: "size", Default: "4g", Doc: "the memory limit: 512m, 4g", Flag: "--memory", Project: "a project may only lower it"}
	if i := slices.IndexFunc(docs, func(d KeyDoc) bool { return d.Name == want.Name }); i < 0 || docs[i] != want {
		t.Errorf("sandbox.memory: %+v, want %+v", docs[i], want)
	}
}
