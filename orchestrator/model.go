package orchestrator

import (
	"fmt"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/agent/provider/anthropic"
	"github.com/shiroagent/shiro/orchestrator/config"
)

// MissingKeyError says the provider has no API key and where one goes.
type MissingKeyError struct{ Provider string }

func (e *MissingKeyError) Error() string {
	env := "ANTHROPIC_API_KEY"
	if e.Provider == config.ProviderOpenAI {
		env = "OPENAI_API_KEY"
	}
	return fmt.Sprintf("No API key for provider %q. Set %s (or SHIRO_API_KEY), or put \"apiKey\" in %s.", e.Provider, env, "~/.config/shiro/config.json")
}

// NewModel builds the configured model.
func NewModel(cfg config.Config, onNotice func(string)) (llm.Model, error) {
	if cfg.APIKeyRequired() && cfg.APIKey == "" {
		return nil, &MissingKeyError{Provider: cfg.Provider}
	}
	switch cfg.Provider {
	case config.ProviderAnthropic:
		return anthropic.New(anthropic.Config{APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, Model: cfg.Model, MaxRetries: cfg.MaxRetries})
	case config.ProviderOpenAI, config.ProviderOpenAICompatible:
		return newOpenAI(cfg, onNotice)
	}
	return nil, fmt.Errorf("unknown provider %q", cfg.Provider)
}
