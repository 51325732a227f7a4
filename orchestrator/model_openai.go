package orchestrator

import (
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/agent/provider/openai"
	"github.com/shiroagent/shiro/orchestrator/config"
)

// newOpenAI builds the OpenAI model: the official endpoint with its
// chat-completions → responses fallback, or any compatible server.
func newOpenAI(cfg config.Config, onNotice func(string)) (llm.Model, error) {
	mode := openai.ModeAuto
	switch cfg.OpenAIAPI {
	case "chat":
		mode = openai.ModeChat
	case "responses":
		mode = openai.ModeResponses
	}
	return openai.New(openai.Config{
		Mode:       mode,
		APIKey:     cfg.APIKey,
		BaseURL:    cfg.BaseURL,
		Model:      cfg.Model,
		MaxRetries: cfg.MaxRetries,
		Compatible: cfg.Provider == config.ProviderOpenAICompatible,
		OnNotice:   onNotice,
	})
}
