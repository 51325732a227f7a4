package config

import (
	"slices"
	"strings"
	"testing"
)

func TestLoadPublish(t *testing.T) {
	t.Parallel()
	t.Run("the user's file and the flags add up, the flag's host port wins", func(t *testing.T) {
		t.Parallel()
		cfg, notices, err := fixture{
			user:  `{"sandbox": {"publish": ["8080:3000", "5173"], "publishAddress": "::1"}}`,
			flags: Overrides{Publish: []string{"8080:4000", "9000"}},
		}.load(t)
		if err != nil || len(notices) != 0 {
			t.Fatalf("load: %v %v", notices, err)
		}
		if want := []string{"5173", "8080:4000", "9000"}; !slices.Equal(cfg.Sandbox.Publish, want) {
			t.Errorf("Publish = %q, want %q", cfg.Sandbox.Publish, want)
		}
		if cfg.Sandbox.PublishAddress != "::1" {
			t.Errorf("PublishAddress = %q", cfg.Sandbox.PublishAddress)
		}
	})
	t.Run("a project opens no host port and chooses no address", func(t *testing.T) {
		t.Parallel()
		cfg, notices, err := fixture{
			user:    `{"sandbox": {"publish": ["8080:3000"]}}`,
			project: `{"sandbox": {"publish": ["22:22", "8080:9999"], "publishAddress": "0.0.0.0"}}`,
		}.load(t)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.Sandbox.Publish, []string{"8080:3000"}) || cfg.Sandbox.PublishAddress != "" {
			t.Errorf("the project's ports were taken: %q at %q", cfg.Sandbox.Publish, cfg.Sandbox.PublishAddress)
		}
		joined := strings.Join(notices, "\n")
		for _, want := range []string{`"sandbox.publish" is ignored: a project cannot open ports on your machine`, `"sandbox.publishAddress" is ignored`} {
			if !strings.Contains(joined, want) {
				t.Errorf("notices %q lack %q", notices, want)
			}
		}
	})
	for name, fx := range map[string]fixture{
		"a port out of range":         {user: `{"sandbox": {"publish": ["0:3000"]}}`},
		"a host port twice in a file": {user: `{"sandbox": {"publish": ["8080:3000", "8080:4000"]}}`},
		"a bad flag":                  {flags: Overrides{Publish: []string{"80:http"}}},
		"a host name for the address": {flags: Overrides{PublishAddress: ptr("localhost")}},
	} {
		t.Run(name+" is an error", func(t *testing.T) {
			t.Parallel()
			if _, _, err := fx.load(t); err == nil || !strings.Contains(err.Error(), "publish") {
				t.Errorf("load: %v, want an error naming publish", err)
			}
		})
	}
}
