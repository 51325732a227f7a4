package tui

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shiroagent/shiro/orchestrator/config"
)

// TestOnboardingTakesThePresetsKeyFromItsVariable: with OPENROUTER_API_KEY,
// GROQ_API_KEY, DEEPSEEK_API_KEY or XAI_API_KEY set, picking that preset
// skips the key step; the key reaches the endpoint, and the config file
// records the preset but not the key.
func TestOnboardingTakesThePresetsKeyFromItsVariable(t *testing.T) {
	for _, id := range []string{"openrouter", "groq", "deepseek", "xai"} {
		t.Run(id, func(t *testing.T) {
			pr, ok := config.PresetByID(id)
			if !ok || pr.KeyEnv == "" {
				t.Fatalf("preset %s has no key variable: %+v", id, pr)
			}
			secret := "sk-" + id + "-from-env-1234"
			t.Setenv(pr.KeyEnv, secret)
			f := newFixture(t, 100, func(o *Options) { o.Configured = false })
			f.m.openOnboarding()
			f.m.form.pick.sel = slices.IndexFunc(config.Presets, func(p config.Preset) bool { return p.ID == id })
			f.m.form.done(f.m) // the listing it returns would go to the vendor: not run
			if f.m.form == nil || !f.m.form.waiting || !strings.Contains(f.m.form.note, "$"+pr.KeyEnv) {
				t.Fatalf("the key step was not skipped: %+v", f.m.form)
			}
			if strings.Contains(f.m.form.note, secret) {
				t.Errorf("the note shows the key: %q", f.m.form.note)
			}

			// The same step against an endpoint on this machine.
			var mu sync.Mutex
			var auth []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				auth = append(auth, r.Header.Get("Authorization"))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"object":"list","data":[{"id":"vendor-model","object":"model"}]}`))
			}))
			defer srv.Close()
			o := onboarding{preset: pr, label: pr.Label, cfg: config.Config{Provider: pr.Provider, PresetID: pr.ID, BaseURL: srv.URL + "/v1", Model: pr.Model, MaxRetries: 0}}
			cmd := f.m.askAPIKey(o)
			if f.m.form == nil || !f.m.form.waiting {
				t.Fatalf("a key form opened: %+v", f.m.form)
			}
			msg, ok := cmd().(onboardModelsMsg)
			if !ok || !slices.Equal(msg.ids, []string{"vendor-model"}) || !msg.o.fromEnv {
				t.Fatalf("listing: %+v", msg)
			}
			mu.Lock()
			if !slices.Contains(auth, "Bearer "+secret) {
				t.Errorf("the endpoint saw Authorization %q", auth)
			}
			mu.Unlock()
			set, ok := f.m.finishOnboarding(msg.o, "vendor-model")().(modelSetMsg)
			if !ok || set.err != nil {
				t.Fatalf("save: %+v", set)
			}
			data, err := os.ReadFile(f.app.opts.Paths.ConfigFile())
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			if doc["presetId"] != id || doc["apiKey"] != nil || strings.Contains(string(data), secret) {
				t.Errorf("config file: %s", data)
			}
		})
	}
}

// TestOnboardingAsksForTheKeyWithoutTheVariable: no variable, the key step
// is shown, and an empty key is refused.
func TestOnboardingAsksForTheKeyWithoutTheVariable(t *testing.T) {
	t.Setenv("GROQ_API_KEY", "")
	f := newFixture(t, 100, func(o *Options) { o.Configured = false })
	pr, _ := config.PresetByID("groq")
	f.m.askAPIKey(onboarding{preset: pr, label: pr.Label, cfg: config.Config{Provider: pr.Provider, BaseURL: pr.BaseURL}})
	if f.m.form == nil || f.m.form.waiting || f.m.form.form == nil {
		t.Fatalf("no key form: %+v", f.m.form)
	}
	if v := f.view(); !strings.Contains(v, "Groq API key") {
		t.Errorf("the key step does not show:\n%s", v)
	}
}
