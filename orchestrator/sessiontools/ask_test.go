package sessiontools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestAsk(t *testing.T) {
	t.Parallel()
	var got Question
	answer := func(a []string, err error) Asker {
		return AskerFunc(func(_ context.Context, q Question) ([]string, error) {
			got = q
			return a, err
		})
	}
	run := func(asker Asker, input string) (string, bool, error) {
		res, err := Ask{Asker: asker}.Run(t.Context(), json.RawMessage(input), nil)
		return res.Output, res.IsError, err
	}

	out, isErr, err := run(answer([]string{"Postgres"}, nil), `{"question":"Which **database**?","options":[{"label":"Postgres","detail":"already used"},{"label":" SQLite "},{"label":"  "}]}`)
	if err != nil || isErr || out != "The user answered: Postgres" {
		t.Errorf("one answer: %q %v %v", out, isErr, err)
	}
	if got.Text != "Which **database**?" || len(got.Options) != 2 || got.Options[1].Label != "SQLite" || got.Options[0].Detail != "already used" || got.Multiple {
		t.Errorf("question as shown: %+v", got)
	}
	if out, _, _ := run(answer([]string{"a", "b"}, nil), `{"question":"which?","options":[{"label":"a"},{"label":"b"}],"multiple":true}`); out != "The user answered: a, b" || !got.Multiple {
		t.Errorf("multiple: %q %+v", out, got)
	}
	if out, isErr, _ := run(answer(nil, nil), `{"question":"name?"}`); out != AskDismissed || isErr {
		t.Errorf("dismissed: %q", out)
	}
	if out, isErr, _ := run(nil, `{"question":"name?"}`); out != AskHeadless || !isErr {
		t.Errorf("no asker: %q", out)
	}
	if out, isErr, _ := run(answer(nil, nil), `{"question":"  "}`); !isErr || out != "question is empty" {
		t.Errorf("empty question: %q", out)
	}
	nine := `{"question":"q","options":[` + strings.Repeat(`{"label":"x"},`, 8) + `{"label":"x"}]}`
	if out, isErr, _ := run(answer(nil, nil), nine); !isErr || !strings.Contains(out, "at most 8") {
		t.Errorf("nine options: %q", out)
	}
	if out, isErr, _ := run(answer(nil, errors.New("no terminal")), `{"question":"q"}`); !isErr || !strings.Contains(out, "no terminal") {
		t.Errorf("asker failure: %q", out)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = Ask{Asker: AskerFunc(func(ctx context.Context, _ Question) ([]string, error) { return nil, ctx.Err() })}.Run(ctx, json.RawMessage(`{"question":"q"}`), nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("aborted turn: %v", err)
	}
}
