package orchestrator

import (
	"testing"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/config"
)

// TestEveryPresetModelIsPriced walks the onboarding's presets and the
// providers' defaults: a new user's usage line is never "unpriced". Local
// and custom endpoints name no model, so they have nothing to price.
func TestEveryPresetModelIsPriced(t *testing.T) {
	t.Parallel()
	var models []string
	for _, p := range config.Presets {
		if p.Model == "" && !p.Keyless && !p.AskURL {
			t.Errorf("preset %s names no model", p.ID)
		}
		if p.Model != "" {
			models = append(models, p.Model)
		}
		models = append(models, p.Fallback...)
	}
	for _, m := range config.DefaultModel {
		models = append(models, m)
	}
	for _, m := range models {
		if _, ok := PriceOf(m); !ok {
			t.Errorf("%s is unpriced", m)
		}
	}
}

func TestPricing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		model string
		in    float64
		ok    bool
	}{
		{"claude-sonnet-4-5", 3, true},
		{"gpt-5-mini-2025", 0.25, true}, // the longest prefix wins over gpt-5
		{"openai/gpt-4o-mini", 0.15, true},
		{"Claude-Opus-4-1", 15, true},
		{"claude-opus-4-20250514", 15, true},
		{"claude-opus-4-5-20251101", 5, true}, // cheaper than the Opus before it
		{"claude-opus-4-8", 0, false},         // not guessed from an older price
		{"claude-sonnet-5-5", 2, true},
		{"claude-opus-5-5-20261001", 4, true}, // not Opus 5's price
		{"claude-haiku-5-5", 0.1, true},
		{"openai/gpt-oss-120b", 0.15, true},
		{"llama3", 0, false},
	}
	for _, tt := range tests {
		p, ok := PriceOf(tt.model)
		if ok != tt.ok || p.Input != tt.in {
			t.Errorf("PriceOf(%q) = %v %v, want input %v %v", tt.model, p, ok, tt.in, tt.ok)
		}
	}
	if usd, _ := Cost("claude-sonnet-4-5", llm.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}); usd != 4.5 {
		t.Errorf("cost %v", usd)
	}
	for usd, want := range map[float64]string{0: "$0.00", 0.0048: "$0.0048", 1.234: "$1.23"} {
		if got := FormatUSD(usd); got != want {
			t.Errorf("FormatUSD(%v) = %q, want %q", usd, got, want)
		}
	}
}
