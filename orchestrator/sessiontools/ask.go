package sessiontools

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/tools"
)

// MaxAskOptions is the most options one question may offer.
const MaxAskOptions = 8

// What the model is told when nobody answers.
const (
	// AskDismissed is the result when the user dismissed the question.
	AskDismissed = "The user dismissed the question without answering. Proceed with your best judgement and state the assumption you made."
	// AskHeadless is the result when no one can be asked.
	AskHeadless = "Nobody can answer questions in this session (it runs headless). Decide yourself and state the assumption you made."
)

// Question is what the ask tool puts to the user.
type Question struct {
	// Text is the question, Markdown.
	Text string
	// Options are the suggested answers, the recommendation first; none
	// means a free-text answer.
	Options []AskOption
	// Multiple allows choosing several options.
	Multiple bool
}

// AskOption is one suggested answer.
type AskOption struct {
	Label  string `json:"label"`
	Detail string `json:"detail,omitempty"`
}

// Asker puts a question to the user and waits for the answer. An empty
// answer means the user dismissed the question. It returns ctx's error
// when the turn is aborted.
type Asker interface {
	Ask(ctx context.Context, q Question) ([]string, error)
}

// AskerFunc adapts a function to Asker.
type AskerFunc func(ctx context.Context, q Question) ([]string, error)

// Ask calls f.
func (f AskerFunc) Ask(ctx context.Context, q Question) ([]string, error) { return f(ctx, q) }

//go:embed ask.md
var askDoc string

var askGuidance, askDescription = tools.SplitDoc(askDoc)

var askSchema = objectSchema([]string{"question"},
	prop{name: "question", typ: "string", desc: "The question, short and specific (Markdown)."},
	prop{name: "options", typ: "array", desc: "Up to 8 suggested answers, your recommendation first.", items: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"label":  map[string]any{"type": "string", "description": "The answer as the user would pick it."},
			"detail": map[string]any{"type": "string", "description": "What choosing it implies."},
		},
		"required":             []string{"label"},
		"additionalProperties": false,
	}},
	prop{name: "multiple", typ: "boolean", desc: "Whether several options may be chosen together."},
)

// Ask is the ask tool. The session offers it only when a person can answer
// (never headless).
type Ask struct {
	Asker Asker
}

func (Ask) Name() string            { return "ask" }
func (Ask) Description() string     { return askDescription }
func (Ask) Guidance() string        { return askGuidance }
func (Ask) Schema() json.RawMessage { return askSchema }
func (Ask) Gated() bool             { return false }

// Run asks and reports the answer.
func (t Ask) Run(ctx context.Context, input json.RawMessage, _ func(string)) (agent.Result, error) {
	var p struct {
		Question string      `json:"question"`
		Options  []AskOption `json:"options"`
		Multiple bool        `json:"multiple"`
	}
	if err := decode(input, &p); err != nil {
		return agent.Result{Output: err.Error(), IsError: true}, nil
	}
	q := Question{Text: strings.TrimSpace(p.Question), Multiple: p.Multiple}
	if q.Text == "" {
		return agent.Result{Output: "question is empty", IsError: true}, nil
	}
	for _, o := range p.Options {
		o.Label, o.Detail = strings.TrimSpace(o.Label), strings.TrimSpace(o.Detail)
		if o.Label != "" {
			q.Options = append(q.Options, o)
		}
	}
	if len(q.Options) > MaxAskOptions {
		return agent.Result{Output: fmt.Sprintf("at most %d options, got %d", MaxAskOptions, len(q.Options)), IsError: true}, nil
	}
	if t.Asker == nil {
		return agent.Result{Output: AskHeadless, IsError: true}, nil
	}
	answer, err := t.Asker.Ask(ctx, q)
	if err != nil {
		if ctx.Err() != nil {
			return agent.Result{}, context.Cause(ctx)
		}
		if errors.Is(err, context.Canceled) {
			return agent.Result{}, err
		}
		return agent.Result{Output: "the question could not be shown: " + err.Error(), IsError: true}, nil
	}
	var parts []string
	for _, a := range answer {
		if a = strings.TrimSpace(a); a != "" {
			parts = append(parts, a)
		}
	}
	if len(parts) == 0 {
		return agent.Result{Output: AskDismissed}, nil
	}
	return agent.Result{Output: "The user answered: " + strings.Join(parts, ", ")}, nil
}
