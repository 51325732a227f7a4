// What each source sets, and how the sources are folded into a Config:
// all of it driven by the table in keys.go, each key's values kept typed
// in its slot.

package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// sourceKind is where a value comes from.
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

// names is how a value of k from src is named in what it adds to Config
// (a host rule's or a credential's Source).
func (src source) names(k *key) string {
	if src.kind == fromFlags {
		return k.flag
	}
	return k.name + " in " + src.file
}

// slot is one key's values during one Load, whatever their type.
type slot interface {
	meta() *key
	// parse reads the key's member of a file as the parser's source.
	parse(p *parser, m member) error
	// readEnv reads the key's environment variable.
	readEnv(getenv func(string) (string, bool)) error
	// readFlag reads the key's flag.
	readFlag(o *Overrides) error
	// fold merges in what src set.
	fold(m *merger, src source)
	// store puts the merged value, or the default, into c.
	store(c *Config)
}

// slotOf is the slot of a keyOf[T].
type slotOf[T any] struct {
	k      *keyOf[T]
	set    [fromFlags + 1]opt[T] // what each source sets, by sourceKind
	merged opt[T]
	apart  opt[T] // the project's value of a key kept apart
}

// meta is the untyped part of the slot's key.
func (s *slotOf[T]) meta() *key { return &s.k.key }

// state is one Load's slots, one for each key in table order.
type state []slot

// newState is a state where no source has set anything.
func newState() state {
	s := make(state, len(keys))
	for i, e := range keys {
		s[i] = e.newSlot()
	}
	return s
}

// named is the slot of a dotted name, or nil.
func (s state) named(name string) slot {
	for _, sl := range s {
		if sl.meta().name == name {
			return sl
		}
	}
	return nil
}

// readEnv reads the keys' SHIRO_* variables; empty values count as unset.
func (s state) readEnv(getenv func(string) (string, bool)) error {
	for _, sl := range s {
		if err := sl.readEnv(getenv); err != nil {
			return err
		}
	}
	return nil
}

// readFlags reads and checks the command line's settings.
func (s state) readFlags(o *Overrides) error {
	var errs []error
	for _, sl := range s {
		if err := sl.readFlag(o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readEnv reads and checks the key's environment variable, if it has one
// and it is set to something.
func (s *slotOf[T]) readEnv(getenv func(string) (string, bool)) error {
	k := s.k
	if k.env == "" {
		return nil
	}
	text, ok := getenv(k.env)
	if !ok || text == "" {
		return nil
	}
	v, ok, err := k.kind.fromText(text)
	if err != nil || !ok {
		return &Error{Key: k.env, Err: mustBe(&k.key, &k.kind.kindInfo, k.env, "")}
	}
	if err := k.validate(k.env, v); err != nil {
		return &Error{Key: k.env, Err: err}
	}
	s.set[fromEnv] = some(v)
	return nil
}

// readFlag reads and checks the key's flag, if it was given.
func (s *slotOf[T]) readFlag(o *Overrides) error {
	k := s.k
	v, ok := k.flagValue(o)
	if !ok {
		return nil
	}
	err := k.validate(k.flag, v)
	if k.flagCheck != nil {
		err = k.flagCheck(v)
	}
	if err != nil {
		return &Error{Key: k.flag, Err: err}
	}
	s.set[fromFlags] = some(v)
	return nil
}

// flagValue reads the key's Overrides field; ok is false when the flag
// was not given (a list flag: when it has no entries).
func (k *keyOf[T]) flagValue(o *Overrides) (v T, ok bool) {
	switch {
	case k.override != nil:
		if p := *k.override(o); p != nil {
			return *p, true
		}
	case k.entries != nil:
		if e := *k.entries(o); e != nil {
			return k.kind.fromEntries(e), true
		}
	}
	return v, false
}

// merger folds the sources together, lowest first.
type merger struct {
	slots   state
	from    map[string]sourceKind // which source set each merged value
	known   []string
	notices []Notice
}

// merge folds in one source's values, in the table's order.
func (m *merger) merge(src source) {
	for _, s := range m.slots {
		s.fold(m, src)
	}
}

// fold merges in src's value of the key, if it set one: a project's is
// judged first, and kept apart when the key says so.
func (s *slotOf[T]) fold(m *merger, src source) {
	k := s.k
	set := s.set[src.kind]
	if !set.ok {
		return
	}
	v := set.v
	if src.kind == fromProject {
		var ok bool
		if v, ok = s.judge(m, v); !ok {
			return
		}
		if k.apart != nil {
			s.apart = some(v)
			return
		}
	}
	if k.tidy != nil {
		v = k.tidy(m, src.file, v)
	}
	if k.kind.merge != nil {
		v = k.kind.merge(s.merged.v, v, src.names(&k.key))
	}
	s.merged, m.from[k.name] = some(v), src.kind
}

// judge holds a project's value to the key's project rule: it returns
// what is kept, and false when nothing is.
func (s *slotOf[T]) judge(m *merger, v T) (T, bool) {
	k := s.k
	var none T
	if k.project.overridable && (s.set[fromEnv].ok || s.set[fromFlags].ok) {
		return none, false
	}
	cur := s.current()
	switch k.project.mode {
	case projectNever:
		if k.quiet == nil || !k.quiet(v, cur) {
			m.refuse(&k.key, k.kind.text(v, true), k.kind.text(cur, false))
		}
		return none, false
	case projectTighten:
		return s.tighten(m, v, cur)
	}
	return v, true
}

// tighten keeps a project's value that does not widen cur, repairs one
// that does when the key can, or keeps the tight entries of a key judged
// by entry.
func (s *slotOf[T]) tighten(m *merger, v, cur T) (T, bool) {
	k := s.k
	if k.narrow != nil {
		kept, loose := k.narrow(v)
		for _, e := range loose {
			m.refuse(&k.key, strconv.Quote(e), k.kind.text(cur, false))
		}
		return kept, true
	}
	if !k.looser(v, cur) {
		return v, true
	}
	m.refuse(&k.key, k.kind.text(v, true), k.kind.text(cur, false))
	if k.repair == nil {
		var none T
		return none, false
	}
	return k.repair(v), true
}

// current is the value a project's is held to: the merged one, else the
// default, else the project base.
func (s *slotOf[T]) current() T {
	switch {
	case s.merged.ok:
		return s.merged.v
	case s.k.def.ok:
		return s.k.def.v
	}
	return s.k.base.v
}

// refuse notes the refusal of a project's value, given as the notice
// shows it, and of the current one.
func (m *merger) refuse(k *key, value, current string) {
	msg := strings.NewReplacer("{key}", quote(k.name), "{value}", value, "{current}", current).Replace(k.project.notice)
	m.notices = append(m.notices, Notice{File: projectFileName, Key: cmp.Or(k.project.noticeKey, k.name), Message: msg})
}

// knownToolSets drops the tool set names the tools package does not know.
func (m *merger) knownToolSets(file string, v []string) []string {
	if m.known == nil {
		return v
	}
	kept := []string{}
	for _, n := range v {
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
	for _, s := range m.slots {
		s.store(&c)
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
		default:
			c.APIKey = presetKey(c, getenv)
		}
	}
	// A project's image may name files inside the workspace only.
	c.Sandbox.ImageFromProject = m.from["sandbox.image"] == fromProject && c.Sandbox.Image != ""
	return c
}

// store puts the merged value (an empty string is unset), or else the
// default, at the key's field, and a project's value kept apart at its
// own.
func (s *slotOf[T]) store(c *Config) {
	k := s.k
	v := s.merged
	if !v.ok || (k.kind.empty != nil && k.kind.empty(v.v)) { // an empty string is unset
		v = k.def
	}
	if v.ok {
		k.put(c, k.to, v.v)
	}
	if s.apart.ok {
		k.put(c, k.apart, s.apart.v)
	}
}

// put puts v at to, cloned when its kind needs it.
func (k *keyOf[T]) put(c *Config, to store[T], v T) {
	if k.kind.clone != nil {
		v = k.kind.clone(v)
	}
	to.put(c, v)
}
