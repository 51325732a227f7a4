package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/shiroagent/shiro/agent/llm"
)

// outputSchema is --output-schema: the JSON Schema the final answer of a
// headless run must satisfy.
type outputSchema struct {
	text     string // the schema as given, for the prompt
	resolved *jsonschema.Resolved
}

// loadOutputSchema reads and compiles the schema in path. A schema that
// refers to another document is refused: nothing is fetched.
func loadOutputSchema(path string) (*outputSchema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--output-schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("--output-schema %s is not a JSON Schema: %w", path, err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("--output-schema %s: %w", path, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, fmt.Errorf("--output-schema %s: %w", path, err)
	}
	return &outputSchema{text: compact.String(), resolved: r}, nil
}

// prompt is the user's prompt with the schema the answer must follow.
func (o *outputSchema) prompt(p string) string {
	return p + "\n\nEnd your work with a final answer that is one JSON value and nothing else (no prose, no code fence), valid against this JSON Schema:\n" + o.text
}

// check returns the final answer as compact JSON when it is a JSON value
// valid against the schema, else an error saying why. A code fence around
// the value is tolerated.
func (o *outputSchema) check(answer string) (json.RawMessage, error) {
	s := strings.TrimSpace(answer)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:]
		}
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	if s == "" {
		return nil, fmt.Errorf("the final answer is empty, not a JSON value")
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the final answer is not a JSON value: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("the final answer holds more than one JSON value")
	}
	var plain any // the validator wants float64 numbers
	_ = json.Unmarshal([]byte(s), &plain)
	if err := o.resolved.Validate(plain); err != nil {
		return nil, fmt.Errorf("the final answer does not match the schema: %w", err)
	}
	var out bytes.Buffer
	_ = json.Compact(&out, []byte(s))
	return out.Bytes(), nil
}

// finalAnswer is the text of the last assistant message of a turn.
func finalAnswer(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != llm.RoleAssistant {
			continue
		}
		var b strings.Builder
		for _, p := range msgs[i].Parts {
			if p.Type == llm.PartText {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}
