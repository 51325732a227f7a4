package tui

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"
	"github.com/charmbracelet/lipgloss"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/config"
)

// formTheme is huh's base theme with shiro's accent.
func formTheme() *huh.Theme {
	t := huh.ThemeBase()
	t.Focused.Title = t.Focused.Title.Bold(true)
	t.Focused.SelectSelector = lipgloss.NewStyle().Foreground(lipgloss.Color("6")).SetString("> ")
	t.Focused.SelectedOption = t.Focused.SelectedOption.Foreground(lipgloss.Color("6"))
	t.Focused.SelectedPrefix = lipgloss.NewStyle().Foreground(lipgloss.Color("6")).SetString("[x] ")
	t.Focused.UnselectedPrefix = lipgloss.NewStyle().SetString("[ ] ")
	t.Focused.Base = lipgloss.NewStyle()
	t.Focused.Card = t.Focused.Base
	t.Blurred = t.Focused
	return t
}

// approvalPrompt asks about one gated call: a huh select, with y / a / n
// as shortcuts.
type approvalPrompt struct {
	msg    approvalMsg
	choice agent.Decision
	form   *huh.Form
}

func newApprovalPrompt(msg approvalMsg, width int) *approvalPrompt {
	a := &approvalPrompt{msg: msg, choice: agent.Once}
	sel := huh.NewSelect[agent.Decision]().
		Options(
			huh.NewOption("Yes, allow once", agent.Once),
			huh.NewOption("Always allow "+msg.req.Tool+" this session", agent.Always),
			huh.NewOption("No, deny", agent.Deny),
		).
		Value(&a.choice).
		Height(3)
	a.form = huh.NewForm(huh.NewGroup(sel)).WithShowHelp(false).WithTheme(formTheme()).WithWidth(max(width-4, 20)).WithHeight(3)
	return a
}

func (a *approvalPrompt) update(m *Model, msg tea.Msg) tea.Cmd {
	f, cmd := a.form.Update(msg)
	a.form = f.(*huh.Form)
	if a.form.State == huh.StateCompleted {
		return tea.Batch(cmd, m.decide(a.choice))
	}
	return cmd
}

// approvalKey handles a key while the approval prompt is open.
func (m *Model) approvalKey(k tea.KeyMsg) tea.Cmd {
	switch k.String() {
	case "y", "Y":
		return m.decide(agent.Once)
	case "a", "A":
		return m.decide(agent.Always)
	case "n", "N", "esc":
		return m.decide(agent.Deny)
	}
	return m.approval.update(m, k)
}

// formModal is a huh form shown instead of the input: onboarding or a
// picker. done runs when it completes; esc cancels it.
type formModal struct {
	title  string
	form   *huh.Form
	done   func(m *Model) tea.Cmd
	cancel func(m *Model) tea.Cmd
}

func (f *formModal) update(m *Model, msg tea.Msg) tea.Cmd {
	next, cmd := f.form.Update(msg)
	f.form = next.(*huh.Form)
	switch f.form.State {
	case huh.StateCompleted:
		m.form = nil
		return tea.Batch(cmd, f.done(m))
	case huh.StateAborted:
		m.form = nil
		if f.cancel != nil {
			return tea.Batch(cmd, f.cancel(m))
		}
	}
	return cmd
}

func (m *Model) openForm(f *formModal) tea.Cmd {
	f.form = f.form.WithShowHelp(true).WithTheme(formTheme()).WithWidth(max(m.contentWidth()-2, 20))
	m.form = f
	return f.form.Init()
}

// preset is a provider choice of the onboarding.
type preset struct {
	label    string
	provider string
	baseURL  string // "" asks for one (custom) unless the provider has a default
	askURL   bool
	keyless  bool
	keyEnv   string
	model    string
	fallback []string // offered when the endpoint lists no models
}

var presets = []preset{
	{label: "Anthropic", provider: config.ProviderAnthropic, keyEnv: "ANTHROPIC_API_KEY", model: "claude-sonnet-5-5", fallback: fallbackModels[config.ProviderAnthropic]},
	{label: "OpenAI", provider: config.ProviderOpenAI, keyEnv: "OPENAI_API_KEY", model: "gpt-5", fallback: fallbackModels[config.ProviderOpenAI]},
	{label: "OpenRouter", provider: config.ProviderOpenAICompatible, baseURL: "https://openrouter.ai/api/v1", model: "anthropic/claude-sonnet-4.5"},
	{label: "Groq", provider: config.ProviderOpenAICompatible, baseURL: "https://api.groq.com/openai/v1", model: "openai/gpt-oss-120b"},
	{label: "DeepSeek", provider: config.ProviderOpenAICompatible, baseURL: "https://api.deepseek.com/v1", model: "deepseek-chat"},
	{label: "xAI", provider: config.ProviderOpenAICompatible, baseURL: "https://api.x.ai/v1", model: "grok-4"},
	{label: "Ollama (local)", provider: config.ProviderOpenAICompatible, baseURL: "http://localhost:11434/v1", keyless: true},
	{label: "LM Studio (local)", provider: config.ProviderOpenAICompatible, baseURL: "http://localhost:1234/v1", keyless: true},
	{label: "Custom OpenAI-compatible endpoint", provider: config.ProviderOpenAICompatible, askURL: true, keyless: true},
	{label: "Custom Anthropic-compatible endpoint", provider: config.ProviderAnthropic, askURL: true},
}

// openOnboarding opens the provider wizard: provider, endpoint (custom
// only), key, model. The answers go to the user's config file.
func (m *Model) openOnboarding() tea.Cmd {
	var (
		choice       = 0
		baseURL, key string
	)
	current := -1
	for i, p := range presets {
		if p.provider == m.cfg.Provider && (p.baseURL == "" || p.baseURL == m.cfg.BaseURL) && !p.askURL {
			current = i
			break
		}
	}
	opts := make([]huh.Option[int], len(presets))
	for i, p := range presets {
		label := p.label
		if i == current && m.configured {
			label += " (current)"
		}
		opts[i] = huh.NewOption(label, i)
	}
	if current >= 0 {
		choice = current
	}
	p := func() preset { return presets[choice] }
	envKey := func() string {
		if p().keyEnv == "" {
			return ""
		}
		v, _ := os.LookupEnv(p().keyEnv)
		return v
	}
	form := huh.NewForm(
		huh.NewGroup(huh.NewSelect[int]().Title("Which provider?").Options(opts...).Value(&choice)),
		huh.NewGroup(huh.NewInput().Title("Endpoint URL").Placeholder("https://host/v1").Value(&baseURL).
			Validate(func(s string) error {
				if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
					return errors.New("an http:// or https:// URL")
				}
				return nil
			})).WithHideFunc(func() bool { return !p().askURL }),
		huh.NewGroup(huh.NewInput().TitleFunc(func() string { return p().label + " API key" }, &choice).
			DescriptionFunc(func() string {
				switch {
				case envKey() != "":
					return "leave empty to use $" + p().keyEnv
				case p().keyless:
					return "leave empty if the server needs none"
				}
				return ""
			}, &choice).
			EchoMode(huh.EchoModePassword).Value(&key).
			Validate(func(s string) error {
				if strings.TrimSpace(s) == "" && !p().keyless && envKey() == "" {
					return errors.New("a key is needed")
				}
				return nil
			})),
	)
	return m.openForm(&formModal{
		title: "Set up a provider",
		form:  form,
		done: func(m *Model) tea.Cmd {
			pr := p()
			cfg := m.cfg
			cfg.Provider = pr.provider
			cfg.BaseURL = strings.TrimSpace(baseURL)
			if !pr.askURL {
				cfg.BaseURL = pr.baseURL
			}
			if cfg.BaseURL == "" {
				cfg.BaseURL = config.DefaultBaseURL[pr.provider]
			}
			cfg.Model = pr.model
			cfg.APIKey = strings.TrimSpace(key)
			fromEnv := false
			if cfg.APIKey == "" {
				cfg.APIKey, fromEnv = envKey(), envKey() != ""
			}
			m.printInfo(fmt.Sprintf("provider: %s, key %s - listing models...", pr.label, maskKey(cfg.APIKey)))
			return m.rt.onboardModels(onboarding{cfg: cfg, fromEnv: fromEnv, label: pr.label, fallback: pr.fallback})
		},
		cancel: onboardingCancelled,
	})
}

// onboarding is the wizard's state between the provider and the model.
type onboarding struct {
	cfg      config.Config
	fromEnv  bool // the key comes from the preset's environment variable
	label    string
	fallback []string // the preset's models when the endpoint lists none
}

// typeOwnModel is the model picker's entry for typing an id.
const typeOwnModel = "\x00type"

// pickOnboardingModel is the wizard's last step: the endpoint's models (or
// the preset's) and "type a model id myself...", or a text field when
// there is nothing to pick from.
func (m *Model) pickOnboardingModel(msg onboardModelsMsg) tea.Cmd {
	o := msg.o
	if msg.warning != "" {
		m.printLine(m.st.warn.Render("could not list models: " + msg.warning))
	}
	if len(msg.ids) == 0 {
		return m.typeOnboardingModel(o)
	}
	choice := o.cfg.Model
	if !slices.Contains(msg.ids, choice) {
		choice = msg.ids[0]
	}
	opts := make([]huh.Option[string], 0, len(msg.ids)+1)
	for _, id := range msg.ids {
		opts = append(opts, huh.NewOption(id, id))
	}
	opts = append(opts, huh.NewOption("type a model id myself...", typeOwnModel))
	h := min(len(opts), 10) + 1
	sel := huh.NewSelect[string]().Title("Which model?").Options(opts...).Value(&choice).Height(h)
	return m.openForm(&formModal{
		title: "Set up " + o.label,
		form:  huh.NewForm(huh.NewGroup(sel)).WithHeight(h + 1),
		done: func(m *Model) tea.Cmd {
			if choice == typeOwnModel {
				return m.typeOnboardingModel(o)
			}
			return m.finishOnboarding(o, choice)
		},
		cancel: onboardingCancelled,
	})
}

// typeOnboardingModel asks for the model id as text.
func (m *Model) typeOnboardingModel(o onboarding) tea.Cmd {
	id := ""
	in := huh.NewInput().Title("Model id").Placeholder(o.cfg.Model).Value(&id).
		Validate(func(s string) error {
			if strings.TrimSpace(s) == "" && o.cfg.Model == "" {
				return errors.New("a model id is needed")
			}
			return nil
		})
	return m.openForm(&formModal{
		title: "Set up " + o.label,
		form:  huh.NewForm(huh.NewGroup(in)),
		done: func(m *Model) tea.Cmd {
			return m.finishOnboarding(o, cmp.Or(strings.TrimSpace(id), o.cfg.Model))
		},
		cancel: onboardingCancelled,
	})
}

// finishOnboarding saves the answers and switches to the model.
func (m *Model) finishOnboarding(o onboarding, model string) tea.Cmd {
	o.cfg.Model = model
	m.printInfo(fmt.Sprintf("provider: %s (%s)", o.label, model))
	return m.rt.saveProvider(o.cfg, o.fromEnv)
}

func onboardingCancelled(m *Model) tea.Cmd {
	if !m.configured {
		m.printInfo(errNoProvider)
	}
	return nil
}

// maskKey shows a key as abcd...wxyz.
func maskKey(k string) string {
	switch {
	case k == "":
		return "none"
	case len(k) <= 8:
		return strings.Repeat("*", len(k))
	}
	return k[:4] + "..." + k[len(k)-4:]
}

// openModelPicker lets the user pick one of ids.
func (m *Model) openModelPicker(ids []string) tea.Cmd {
	choice := m.stats.model
	opts := make([]huh.Option[string], len(ids))
	for i, id := range ids {
		label := id
		if id == m.stats.model {
			label += " (current)"
		}
		opts[i] = huh.NewOption(label, id)
	}
	h := min(len(ids), 10) + 1
	sel := huh.NewSelect[string]().Title("Model").Options(opts...).Value(&choice).Height(h).Filtering(false)
	return m.openForm(&formModal{
		title: "Pick a model",
		form:  huh.NewForm(huh.NewGroup(sel)).WithHeight(h),
		done:  func(m *Model) tea.Cmd { return m.switchModel(choice) },
	})
}

// switchModel builds the model id on the current provider.
func (m *Model) switchModel(id string) tea.Cmd {
	cfg := m.cfg
	cfg.Model = id
	return m.rt.setModel(cfg)
}

func usageOf(in, out int) llm.Usage { return llm.Usage{InputTokens: in, OutputTokens: out} }
