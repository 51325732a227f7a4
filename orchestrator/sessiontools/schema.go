package sessiontools

import (
	"encoding/json"
	"fmt"
)

// decode reads a call's input into p; a bad input is a message for the
// model.
func decode(input json.RawMessage, p any) error {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, p); err != nil {
		return inputError("invalid arguments: " + err.Error())
	}
	return nil
}

// prop is one property of an object schema.
type prop struct {
	name, typ, desc string
	enum            []string
	items           map[string]any
}

// objectSchema builds {"type":"object","properties":…,"required":…}.
func objectSchema(required []string, props ...prop) json.RawMessage {
	ps := map[string]any{}
	for _, p := range props {
		s := map[string]any{"type": p.typ}
		if p.desc != "" {
			s["description"] = p.desc
		}
		if len(p.enum) > 0 {
			s["enum"] = p.enum
		}
		if p.items != nil {
			s["items"] = p.items
		}
		ps[p.name] = s
	}
	doc := map[string]any{"type": "object", "properties": ps}
	if len(required) > 0 {
		doc["required"] = required
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("schema: %v", err)) // a programming error
	}
	return b
}
