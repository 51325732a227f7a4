package orchestrator

import (
	"context"
	"fmt"

	"github.com/shiroagent/shiro/agent/provider/anthropic"
	"github.com/shiroagent/shiro/agent/provider/openai"
	"github.com/shiroagent/shiro/orchestrator/config"
)

// ListModels asks the configured endpoint which models it serves (sorted
// ids). The caller falls back to a list of its own on error.
func ListModels(ctx context.Context, cfg config.Config) ([]string, error) {
	switch cfg.Provider {
	case config.ProviderAnthropic:
		return anthropic.ListModels(ctx, anthropic.Config{APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, Model: cfg.Model, MaxRetries: cfg.MaxRetries})
	case config.ProviderOpenAI, config.ProviderOpenAICompatible:
		return openai.ListModels(ctx, openai.Config{
			APIKey:     cfg.APIKey,
			BaseURL:    cfg.BaseURL,
			Model:      cfg.Model,
			MaxRetries: cfg.MaxRetries,
			Compatible: cfg.Provider == config.ProviderOpenAICompatible,
		})
	}
	return nil, fmt.Errorf("list models: unknown provider %q", cfg.Provider)
}
