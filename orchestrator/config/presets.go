package config

// A Preset is a provider choice of the onboarding (/provider): a protocol,
// an endpoint, where its key comes from and which models to start with.
type Preset struct {
	// ID is what the presetId key records.
	ID    string
	Label string
	// Provider is the wire protocol.
	Provider string
	// BaseURL is the endpoint; "" is the provider's default, or asked for
	// when AskURL is set.
	BaseURL string
	AskURL  bool
	// Keyless servers need no key; the key step is skipped for the local
	// ones (a fixed BaseURL) and optional for a custom endpoint.
	Keyless bool
	// KeyEnv is the variable that holds the preset's key: when it is set,
	// the onboarding skips the key step, and a config whose presetId names
	// the preset reads it while the endpoint is still the preset's.
	KeyEnv string
	// Model is the model picked first; Fallback is offered when the
	// endpoint lists no models.
	Model    string
	Fallback []string
}

// Presets are the onboarding's providers, in the order offered.
var Presets = []Preset{
	{ID: "anthropic", Label: "Anthropic", Provider: ProviderAnthropic, KeyEnv: "ANTHROPIC_API_KEY",
		Model: DefaultModel[ProviderAnthropic], Fallback: []string{"claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5"}},
	{ID: "openai", Label: "OpenAI", Provider: ProviderOpenAI, KeyEnv: "OPENAI_API_KEY",
		Model: DefaultModel[ProviderOpenAI], Fallback: []string{"gpt-5", "gpt-5-mini", "o4-mini"}},
	{ID: "openrouter", Label: "OpenRouter", Provider: ProviderOpenAICompatible, BaseURL: "https://openrouter.ai/api/v1",
		KeyEnv: "OPENROUTER_API_KEY", Model: "anthropic/claude-sonnet-4.5"},
	{ID: "groq", Label: "Groq", Provider: ProviderOpenAICompatible, BaseURL: "https://api.groq.com/openai/v1",
		KeyEnv: "GROQ_API_KEY", Model: "openai/gpt-oss-120b"},
	{ID: "deepseek", Label: "DeepSeek", Provider: ProviderOpenAICompatible, BaseURL: "https://api.deepseek.com/v1",
		KeyEnv: "DEEPSEEK_API_KEY", Model: "deepseek-chat"},
	{ID: "xai", Label: "xAI", Provider: ProviderOpenAICompatible, BaseURL: "https://api.x.ai/v1",
		KeyEnv: "XAI_API_KEY", Model: "grok-4"},
	{ID: "ollama", Label: "Ollama (local)", Provider: ProviderOpenAICompatible, BaseURL: "http://localhost:11434/v1", Keyless: true},
	{ID: "lmstudio", Label: "LM Studio (local)", Provider: ProviderOpenAICompatible, BaseURL: "http://localhost:1234/v1", Keyless: true},
	{ID: "custom-openai", Label: "Custom OpenAI-compatible endpoint", Provider: ProviderOpenAICompatible, AskURL: true, Keyless: true},
	{ID: "custom-anthropic", Label: "Custom Anthropic-compatible endpoint", Provider: ProviderAnthropic, AskURL: true},
}

// PresetByID finds a preset; ok is false for an unknown id.
func PresetByID(id string) (Preset, bool) {
	for _, p := range Presets {
		if p.ID == id {
			return p, true
		}
	}
	return Preset{}, false
}

// presetKey is the key a config without one gets from its preset's
// variable: only for a compatible preset (the official providers read
// theirs anyway) and only while the endpoint is the preset's, so that a
// changed baseURL never receives another vendor's key.
func presetKey(c Config, getenv func(string) (string, bool)) string {
	p, ok := PresetByID(c.PresetID)
	if !ok || p.KeyEnv == "" || p.Provider != c.Provider || p.BaseURL == "" || p.BaseURL != c.BaseURL {
		return ""
	}
	v, _ := getenv(p.KeyEnv)
	return v
}
