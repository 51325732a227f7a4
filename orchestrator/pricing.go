package orchestrator

import (
	"fmt"
	"strings"

	"github.com/shiroagent/shiro/agent/llm"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input, Output float64
}

// prices are matched by the longest prefix of the lower-cased model id. A
// model missing here is shown as unpriced rather than guessed.
var prices = map[string]Price{
	"claude-opus-4-0":   {15, 75},
	"claude-opus-4-1":   {15, 75},
	"claude-opus-4-2":   {15, 75}, // claude-opus-4-20250514
	"claude-opus-4-5":   {5, 25},
	"claude-opus-4-6":   {5, 25},
	"claude-opus-5":     {5, 25},
	"claude-opus-5-5":   {4, 20},
	"claude-sonnet-5":   {2, 10},    // claude-sonnet-5, claude-sonnet-5-5
	"claude-haiku-5-5":  {0.1, 0.5}, // prompts up to 100,000 tokens
	"claude-sonnet-4":   {3, 15},
	"claude-haiku-4":    {1, 5},
	"claude-3-5-haiku":  {0.8, 4},
	"gpt-5":             {1.25, 10},
	"gpt-5-mini":        {0.25, 2},
	"gpt-5-nano":        {0.05, 0.4},
	"gpt-4o":            {2.5, 10},
	"gpt-4o-mini":       {0.15, 0.6},
	"o4-mini":           {1.1, 4.4},
	"deepseek-chat":     {0.27, 1.1},
	"deepseek-reasoner": {0.55, 2.19},
	"grok-4":            {3, 15},
	"gpt-oss-120b":      {0.15, 0.6}, // Groq
}

// PriceOf finds a model's price: the longest matching prefix of its
// lower-cased id, after a "vendor/" prefix is stripped. ok is false for an
// unpriced model.
func PriceOf(model string) (p Price, ok bool) {
	id := strings.ToLower(model)
	if i := strings.LastIndex(id, "/"); i >= 0 {
		id = id[i+1:]
	}
	best := ""
	for prefix, price := range prices {
		if strings.HasPrefix(id, prefix) && len(prefix) > len(best) {
			best, p = prefix, price
		}
	}
	return p, best != ""
}

// Cost prices a usage; ok is false for an unpriced model.
func Cost(model string, u llm.Usage) (usd float64, ok bool) {
	p, ok := PriceOf(model)
	if !ok {
		return 0, false
	}
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output) / 1e6, true
}

// FormatUSD shows dollars: $0.00 for nothing, four decimals under a cent,
// two otherwise.
func FormatUSD(usd float64) string {
	switch {
	case usd == 0:
		return "$0.00"
	case usd < 0.01:
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}
