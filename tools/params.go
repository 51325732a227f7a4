package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A params struct describes a tool's input. Its fields carry:
//
//	json:"name[,omitempty]"   the camelCase name; without omitempty the field is required
//	desc:"..."               the description the model reads
//	jsonschema:"k=v,..."     constraints: minimum, maximum, minItems, maxItems,
//	                         minLength (numbers) and default (a JSON literal)
//
// Field kinds: string, bool, int, slices and structs of those. The schema
// generated from the tags is also what decodeParams validates, so the model
// is told exactly what is checked.

// fieldSpec is one field of a params struct.
type fieldSpec struct {
	index    int
	name     string
	required bool
	desc     string
	cons     map[string]string
}

func fieldsOf(t reflect.Type) []fieldSpec {
	var fs []fieldSpec
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("json")
		if !ok || tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		spec := fieldSpec{index: i, name: name, required: !strings.Contains(opts, "omitempty"), desc: f.Tag.Get("desc")}
		if c := f.Tag.Get("jsonschema"); c != "" {
			spec.cons = map[string]string{}
			for kv := range strings.SplitSeq(c, ",") {
				k, v, _ := strings.Cut(kv, "=")
				spec.cons[k] = v
			}
		}
		fs = append(fs, spec)
	}
	return fs
}

// schemaFor returns the JSON schema of params type P: an object schema
// with "properties" and "required".
func schemaFor[P any]() json.RawMessage {
	b, err := json.Marshal(typeSchema(reflect.TypeFor[P](), nil))
	if err != nil {
		panic(fmt.Sprintf("schema of %s: %v", reflect.TypeFor[P](), err)) // a programming error in a params struct
	}
	return b
}

func typeSchema(t reflect.Type, f *fieldSpec) map[string]any {
	s := map[string]any{}
	switch t.Kind() {
	case reflect.String:
		s["type"] = "string"
	case reflect.Bool:
		s["type"] = "boolean"
	case reflect.Int:
		s["type"] = "integer"
	case reflect.Slice:
		s["type"] = "array"
		s["items"] = typeSchema(t.Elem(), nil)
	case reflect.Struct:
		s["type"] = "object"
		props := map[string]any{}
		required := []string{}
		for _, fs := range fieldsOf(t) {
			props[fs.name] = typeSchema(t.Field(fs.index).Type, &fs)
			if fs.required {
				required = append(required, fs.name)
			}
		}
		s["properties"] = props
		// Unknown parameters are refused by decodeParams, not announced:
		// additionalProperties and an empty required cost every request
		// characters and tell the model nothing it needs.
		if len(required) > 0 {
			s["required"] = required
		}
	default:
		panic(fmt.Sprintf("params field of kind %s", t.Kind()))
	}
	if f == nil {
		return s
	}
	if f.desc != "" {
		s["description"] = f.desc
	}
	for k, v := range f.cons {
		if k == "default" {
			s[k] = json.RawMessage(v)
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(fmt.Sprintf("params field %s: constraint %s=%q is not a number", f.name, k, v))
		}
		s[k] = n
	}
	return s
}

// decodeParams validates input against P's schema and decodes it, filling
// defaults for absent fields. A JSON null counts as absent. The failure is
// the message for the model, prefixed with the tool's name.
func decodeParams[P any](tool string, input json.RawMessage) (*P, string) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Sprintf("Invalid input for %s: malformed JSON: %v", tool, err)
	}
	if raw == nil {
		raw = map[string]any{} // "null" input: no parameters
	}
	p := new(P)
	if err := fill(reflect.ValueOf(p).Elem(), raw, nil, ""); err != nil {
		return nil, fmt.Sprintf("Invalid input for %s: %v", tool, err)
	}
	return p, ""
}

// fill checks raw against the type of v and stores it, field by field.
func fill(v reflect.Value, raw any, f *fieldSpec, at string) error {
	name := at
	if name == "" {
		name = "input"
	}
	switch v.Kind() {
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			return fmt.Errorf("%s must be a string", name)
		}
		if m, ok := constraint(f, "minLength"); ok && len(s) < m {
			return fmt.Errorf("%s must not be empty", name)
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			return fmt.Errorf("%s must be true or false", name)
		}
		v.SetBool(b)
	case reflect.Int:
		num, ok := raw.(json.Number)
		if !ok {
			return fmt.Errorf("%s must be an integer", name)
		}
		n, err := strconv.Atoi(num.String())
		if err != nil {
			fl, ferr := num.Float64()
			if ferr != nil || fl != float64(int(fl)) {
				return fmt.Errorf("%s must be an integer, got %s", name, num)
			}
			n = int(fl)
		}
		if m, ok := constraint(f, "minimum"); ok && n < m {
			return fmt.Errorf("%s must be at least %d, got %d", name, m, n)
		}
		if m, ok := constraint(f, "maximum"); ok && n > m {
			return fmt.Errorf("%s must be at most %d, got %d", name, m, n)
		}
		v.SetInt(int64(n))
	case reflect.Slice:
		arr, ok := raw.([]any)
		if !ok {
			return fmt.Errorf("%s must be an array", name)
		}
		if m, ok := constraint(f, "minItems"); ok && len(arr) < m {
			return fmt.Errorf("%s must have at least %d item(s), got %d", name, m, len(arr))
		}
		if m, ok := constraint(f, "maxItems"); ok && len(arr) > m {
			return fmt.Errorf("%s must have at most %d items, got %d", name, m, len(arr))
		}
		s := reflect.MakeSlice(v.Type(), len(arr), len(arr))
		for i, item := range arr {
			if err := fill(s.Index(i), item, nil, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Struct:
		obj, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("%s must be an object", name)
		}
		fields := fieldsOf(v.Type())
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			if !slices.ContainsFunc(fields, func(f fieldSpec) bool { return f.name == key }) {
				return fmt.Errorf("unknown parameter %q", joinAt(at, key))
			}
		}
		for _, fs := range fields {
			fieldAt := joinAt(at, fs.name)
			val, present := obj[fs.name]
			if !present || val == nil {
				if fs.required {
					return fmt.Errorf("missing required parameter %q", fieldAt)
				}
				if d, ok := fs.cons["default"]; ok {
					if err := json.Unmarshal([]byte(d), v.Field(fs.index).Addr().Interface()); err != nil {
						return fmt.Errorf("default of %s: %w", fieldAt, err)
					}
				}
				continue
			}
			if err := fill(v.Field(fs.index), val, &fs, fieldAt); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%s has an unsupported type", name)
	}
	return nil
}

func joinAt(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

func constraint(f *fieldSpec, key string) (int, bool) {
	if f == nil {
		return 0, false
	}
	v, ok := f.cons[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// fileTool is a built-in tool whose input is the params struct P.
type fileTool[P any] struct {
	name     string
	set      Set
	gated    bool
	guidance string
	desc     string
	schema   json.RawMessage
	run      func(ctx context.Context, env *Env, p *P) (Result, error)
	check    func(env *Env, p *P) (problem string) // nil: nothing to check
}

// withCheck gives the tool a Check (see Checker).
func (t *fileTool[P]) withCheck(check func(env *Env, p *P) string) *fileTool[P] {
	t.check = check
	return t
}

// Check implements Checker: invalid input, or what the tool's check finds.
func (t *fileTool[P]) Check(_ context.Context, env *Env, input json.RawMessage) string {
	p, msg := decodeParams[P](t.name, input)
	if p == nil {
		return msg
	}
	if t.check == nil {
		return ""
	}
	return t.check(env, p)
}

func newFileTool[P any](name string, set Set, gated bool, doc string, run func(context.Context, *Env, *P) (Result, error)) *fileTool[P] {
	guidance, desc := SplitDoc(doc)
	return &fileTool[P]{name: name, set: set, gated: gated, guidance: guidance, desc: desc, schema: schemaFor[P](), run: run}
}

func (t *fileTool[P]) Name() string            { return t.name }
func (t *fileTool[P]) Set() Set                { return t.set }
func (t *fileTool[P]) Gated() bool             { return t.gated }
func (t *fileTool[P]) Description() string     { return t.desc }
func (t *fileTool[P]) Guidance() string        { return t.guidance }
func (t *fileTool[P]) Schema() json.RawMessage { return t.schema }

// Run decodes the input, reports invalid input as an error result, and
// caps what the tool returns.
func (t *fileTool[P]) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	p, msg := decodeParams[P](t.name, input)
	if p == nil {
		return Errorf("%s", msg), nil
	}
	res, err := t.run(ctx, env, p)
	if err != nil {
		return Result{}, err
	}
	res.Text = Cap(res.Text)
	return res, nil
}
