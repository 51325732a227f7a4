// The layers of the environment and the flags, and how the layers are
// folded into a Config: all of it driven by the table in keys.go.

package config

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// envLayer reads the keys' SHIRO_* variables; empty values count as unset.
func envLayer(getenv func(string) (string, bool)) (layer, error) {
	l := layer{}
	for _, k := range keys {
		s, ok := getenv(k.env)
		if k.env == "" || !ok || s == "" {
			continue
		}
		var v any = s
		if k.kind.json != "a string" {
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
			k.apply(&c, v, false)
		}
		if v, ok := m.apart[k.name]; ok {
			k.apply(&c, v, true)
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

// apply puts v into the key's Config field, or into its project field
// for a project's value kept apart.
func (k *key) apply(c *Config, v any, project bool) {
	at := k.field
	switch {
	case project:
		at = k.project.projectField
	case k.set != nil:
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
