package orchestrator

import (
	"context"
	"errors"
	"iter"

	"github.com/shiroagent/shiro/agent/llm"
)

// ErrUnconfigured is the error of every call to the placeholder model a
// session holds until a provider is configured.
var ErrUnconfigured = errors.New("no provider configured yet - run /provider")

// UnconfiguredModel is the placeholder model of a session started without a
// usable provider (no API key): it refuses every call. The TUI swaps in the
// real model once onboarding is done.
func UnconfiguredModel(provider, model string) llm.Model {
	return unconfigured{info: llm.ModelInfo{Provider: provider, Model: model}}
}

type unconfigured struct{ info llm.ModelInfo }

func (u unconfigured) Info() llm.ModelInfo { return u.info }

func (unconfigured) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) { yield(llm.Event{}, ErrUnconfigured) }
}
