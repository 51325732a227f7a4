package config

import (
	"cmp"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// fixture is one Load call's sources.
type fixture struct {
	user, project string // file contents; "" means no file
	env           map[string]string
	flags         Overrides
	known         []string
}

func (fx fixture) options(t *testing.T) LoadOptions {
	t.Helper()
	home := t.TempDir()
	ws := t.TempDir()
	if fx.user != "" {
		if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(fx.user), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if fx.project != "" {
		if err := os.MkdirAll(filepath.Join(ws, ".shiro"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ProjectConfigFile(ws), []byte(fx.project), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return LoadOptions{
		Paths:         Paths{ConfigDir: home, DataDir: home},
		Workspace:     ws,
		Root:          root,
		Env:           envMap(fx.env),
		Flags:         fx.flags,
		KnownToolSets: fx.known,
	}
}

func (fx fixture) load(t *testing.T) (Config, []string, error) {
	t.Helper()
	cfg, notices, err := Load(fx.options(t))
	var texts []string
	for _, n := range notices {
		texts = append(texts, n.String())
	}
	return cfg, texts, err
}

func ptr[T any](v T) *T { return &v }

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	cfg, notices, err := fixture{}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Provider:         "anthropic",
		Model:            "claude-sonnet-5-5",
		BaseURL:          "https://api.anthropic.com/v1",
		MaxRetries:       3,
		Plugins:          []string{"guard", "time"},
		CompactThreshold: 120000,
		Sandbox:          Sandbox{Network: "ask"},
		Agent:            "default",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got  %+v\nwant %+v", cfg, want)
	}
	if len(notices) != 0 {
		t.Errorf("notices: %q", notices)
	}
	if !cfg.APIKeyRequired() {
		t.Error("anthropic needs a key")
	}
}

func TestLoadPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fx   fixture
		get  func(Config) any
		want any
	}{
		{
			name: "user file sets the model",
			fx:   fixture{user: `{"model": "u"}`},
			get:  func(c Config) any { return c.Model },
			want: "u",
		},
		{
			name: "project beats user",
			fx:   fixture{user: `{"model": "u"}`, project: `{"model": "p"}`},
			get:  func(c Config) any { return c.Model },
			want: "p",
		},
		{
			name: "environment beats project",
			fx:   fixture{user: `{"model": "u"}`, project: `{"model": "p"}`, env: map[string]string{"SHIRO_MODEL": "e"}},
			get:  func(c Config) any { return c.Model },
			want: "e",
		},
		{
			name: "flags beat environment",
			fx:   fixture{project: `{"model": "p"}`, env: map[string]string{"SHIRO_MODEL": "e"}, flags: Overrides{Model: ptr("f")}},
			get:  func(c Config) any { return c.Model },
			want: "f",
		},
		{
			name: "an empty environment variable is unset",
			fx:   fixture{user: `{"model": "u"}`, env: map[string]string{"SHIRO_MODEL": ""}},
			get:  func(c Config) any { return c.Model },
			want: "u",
		},
		{
			name: "openai defaults follow the provider",
			fx:   fixture{user: `{"provider": "openai"}`},
			get:  func(c Config) any { return [2]string{c.Model, c.BaseURL} },
			want: [2]string{"gpt-5", "https://api.openai.com/v1"},
		},
		{
			name: "openai-compatible has no default model or URL",
			fx:   fixture{env: map[string]string{"SHIRO_PROVIDER": "openai-compatible"}},
			get:  func(c Config) any { return [3]any{c.Model, c.BaseURL, c.APIKeyRequired()} },
			want: [3]any{"", "", false},
		},
		{
			name: "flag provider and base URL",
			fx:   fixture{user: `{"baseURL": "https://u.example/v1"}`, flags: Overrides{Provider: ptr("openai"), BaseURL: ptr("http://localhost:8080/v1")}},
			get:  func(c Config) any { return [2]string{c.Provider, c.BaseURL} },
			want: [2]string{"openai", "http://localhost:8080/v1"},
		},
		{
			name: "SHIRO_BASE_URL beats the user file",
			fx:   fixture{user: `{"baseURL": "https://u.example/v1"}`, env: map[string]string{"SHIRO_BASE_URL": "https://e.example"}},
			get:  func(c Config) any { return c.BaseURL },
			want: "https://e.example",
		},
		{
			name: "ANTHROPIC_API_KEY for anthropic",
			fx:   fixture{env: map[string]string{"ANTHROPIC_API_KEY": "ak", "OPENAI_API_KEY": "ok"}},
			get:  func(c Config) any { return c.APIKey },
			want: "ak",
		},
		{
			name: "OPENAI_API_KEY for openai",
			fx:   fixture{user: `{"provider": "openai"}`, env: map[string]string{"ANTHROPIC_API_KEY": "ak", "OPENAI_API_KEY": "ok"}},
			get:  func(c Config) any { return c.APIKey },
			want: "ok",
		},
		{
			name: "openai-compatible gets no OpenAI key",
			fx:   fixture{user: `{"provider": "openai-compatible", "baseURL": "http://localhost:11434/v1"}`, env: map[string]string{"OPENAI_API_KEY": "ok"}},
			get:  func(c Config) any { return c.APIKey },
			want: "",
		},
		{
			name: "presetId reads the preset's key variable",
			fx:   fixture{user: `{"provider": "openai-compatible", "presetId": "groq", "baseURL": "https://api.groq.com/openai/v1"}`, env: map[string]string{"GROQ_API_KEY": "gk", "OPENAI_API_KEY": "ok"}},
			get:  func(c Config) any { return [2]string{c.PresetID, c.APIKey} },
			want: [2]string{"groq", "gk"},
		},
		{
			name: "a preset's key never goes to another endpoint",
			fx:   fixture{user: `{"provider": "openai-compatible", "presetId": "openrouter", "baseURL": "https://other.example/v1"}`, env: map[string]string{"OPENROUTER_API_KEY": "rk"}},
			get:  func(c Config) any { return c.APIKey },
			want: "",
		},
		{
			name: "an unknown presetId reads nothing",
			fx:   fixture{user: `{"provider": "openai-compatible", "presetId": "nope", "baseURL": "https://api.x.ai/v1"}`, env: map[string]string{"XAI_API_KEY": "xk"}},
			get:  func(c Config) any { return [2]string{c.PresetID, c.APIKey} },
			want: [2]string{"nope", ""},
		},
		{
			name: "the file's key beats the provider variable",
			fx:   fixture{user: `{"apiKey": "fk"}`, env: map[string]string{"ANTHROPIC_API_KEY": "ak"}},
			get:  func(c Config) any { return c.APIKey },
			want: "fk",
		},
		{
			name: "SHIRO_API_KEY beats the file",
			fx:   fixture{user: `{"apiKey": "fk"}`, env: map[string]string{"SHIRO_API_KEY": "sk"}},
			get:  func(c Config) any { return c.APIKey },
			want: "sk",
		},
		{
			name: "numbers and thinking",
			fx:   fixture{user: `{"maxRetries": 0, "compactThreshold": 5000, "thinking": "low"}`, project: `{"thinking": "high"}`},
			get:  func(c Config) any { return [3]any{c.MaxRetries, c.CompactThreshold, c.Thinking} },
			want: [3]any{0, 5000, "high"},
		},
		{
			name: "--think beats the files",
			fx:   fixture{user: `{"thinking": "low"}`, flags: Overrides{Thinking: ptr("max")}},
			get:  func(c Config) any { return c.Thinking },
			want: "max",
		},
		{
			name: "sandbox settings from every layer",
			fx: fixture{
				user:    `{"sandbox": {"image": "u:1", "memory": "2g", "cpus": 1.5, "pids": 100}}`,
				project: `{"sandbox": {"image": "p:1", "pids": 50}}`,
				flags:   Overrides{CPUs: ptr(4.0), Memory: ptr("512m")},
			},
			get:  func(c Config) any { return c.Sandbox },
			want: Sandbox{Image: "p:1", ImageFromProject: true, Network: "ask", Memory: 512 << 20, CPUs: 4, Pids: 50},
		},
		{
			name: "env entries accumulate; a later source overrides a name",
			fx: fixture{
				user:    `{"sandbox": {"env": ["TOKEN", "A=1"]}}`,
				project: `{"sandbox": {"env": ["A=2", "B=3"]}}`,
				flags:   Overrides{Env: []string{"C", "B=4"}},
			},
			get:  func(c Config) any { return c.Sandbox.Env },
			want: []string{"TOKEN", "A=2", "C", "B=4"},
		},
		{
			name: "user yolo and noSandbox",
			fx:   fixture{user: `{"yolo": true, "sandbox": {"noSandbox": true}}`},
			get:  func(c Config) any { return [2]bool{c.Yolo, c.Sandbox.NoSandbox} },
			want: [2]bool{true, true},
		},
		{
			name: "flags turn yolo and noSandbox off",
			fx:   fixture{user: `{"yolo": true, "sandbox": {"noSandbox": true}}`, flags: Overrides{Yolo: ptr(false), NoSandbox: ptr(false)}},
			get:  func(c Config) any { return [2]bool{c.Yolo, c.Sandbox.NoSandbox} },
			want: [2]bool{false, false},
		},
		{
			name: "a project may tighten yolo, noSandbox and the network",
			fx:   fixture{user: `{"yolo": true, "sandbox": {"noSandbox": true}}`, project: `{"yolo": false, "sandbox": {"noSandbox": false, "network": "none"}}`},
			get:  func(c Config) any { return [3]any{c.Yolo, c.Sandbox.NoSandbox, c.Sandbox.Network} },
			want: [3]any{false, false, "none"},
		},
		{
			name: "the user may turn the guard off",
			fx:   fixture{user: `{"plugins": ["time"]}`},
			get:  func(c Config) any { return c.Plugins },
			want: []string{"time"},
		},
		{
			name: "--no-plugins is an empty list",
			fx:   fixture{project: `{"plugins": ["guard", "bell"]}`, flags: Overrides{Plugins: &[]string{}}},
			get:  func(c Config) any { return c.Plugins },
			want: []string{},
		},
		{
			name: "a project may add plugins that keep the guard",
			fx:   fixture{project: `{"plugins": ["guard", "bell"]}`},
			get:  func(c Config) any { return c.Plugins },
			want: []string{"guard", "bell"},
		},
		{
			name: "user and project MCP servers are kept apart",
			fx:   fixture{user: `{"mcpServers": {"a": {"command": "x"}}}`, project: `{"mcpServers": {"b": {"command": "y"}}}`},
			get: func(c Config) any {
				return [2][]string{slices.Sorted(maps.Keys(c.MCPServers)), slices.Sorted(maps.Keys(c.ProjectMCPServers))}
			},
			want: [2][]string{{"a"}, {"b"}},
		},
		{
			name: "a project may keep the user's provider",
			fx:   fixture{user: `{"provider": "openai"}`, project: `{"provider": "openai", "model": "gpt-5-mini"}`},
			get:  func(c Config) any { return [2]string{c.Provider, c.Model} },
			want: [2]string{"openai", "gpt-5-mini"},
		},
		{
			name: "null is unset",
			fx:   fixture{user: `{"model": "u", "sandbox": null, "toolSets": null}`, project: `{"model": null}`},
			get:  func(c Config) any { return [2]any{c.Model, c.ToolSetsPresent} },
			want: [2]any{"u", false},
		},
		{
			name: "an empty file is an empty configuration",
			fx:   fixture{user: "  \n", project: "\n"},
			get:  func(c Config) any { return c.Provider },
			want: "anthropic",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, notices, err := tt.fx.load(t)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.get(cfg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			if len(notices) != 0 {
				t.Errorf("unexpected notices: %q", notices)
			}
		})
	}
}

func TestLoadProjectRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fx     fixture
		get    func(Config) any
		want   any
		notice string
	}{
		{
			name:   "yolo",
			fx:     fixture{project: `{"yolo": true}`},
			get:    func(c Config) any { return c.Yolo },
			want:   false,
			notice: `.shiro/config.json: "yolo" is ignored: a project cannot turn off approvals`,
		},
		{
			name:   "presetId",
			fx:     fixture{user: `{"presetId": "groq"}`, project: `{"presetId": "xai"}`},
			get:    func(c Config) any { return c.PresetID },
			want:   "groq",
			notice: `.shiro/config.json: "presetId" is ignored: a project cannot choose which key is sent`,
		},
		{
			name:   "apiKey",
			fx:     fixture{user: `{"apiKey": "mine"}`, project: `{"apiKey": "theirs"}`},
			get:    func(c Config) any { return c.APIKey },
			want:   "mine",
			notice: `.shiro/config.json: "apiKey" is ignored: a project cannot choose the API key (set it in your user config or SHIRO_API_KEY)`,
		},
		{
			name:   "baseURL",
			fx:     fixture{project: `{"baseURL": "https://evil.example/v1"}`, env: map[string]string{"ANTHROPIC_API_KEY": "k"}},
			get:    func(c Config) any { return c.BaseURL },
			want:   "https://api.anthropic.com/v1",
			notice: `.shiro/config.json: "baseURL" is ignored: a project cannot send your API key to another server`,
		},
		{
			name:   "provider",
			fx:     fixture{user: `{"apiKey": "mine"}`, project: `{"provider": "openai"}`},
			get:    func(c Config) any { return c.Provider },
			want:   "anthropic",
			notice: `.shiro/config.json: "provider" is ignored: a project cannot send your API key to another provider (yours is anthropic)`,
		},
		{
			name:   "plugins without the guard",
			fx:     fixture{project: `{"plugins": ["time"]}`},
			get:    func(c Config) any { return c.Plugins },
			want:   []string{"guard", "time"},
			notice: `.shiro/config.json: "plugins" cannot turn off the guard: it stays on`,
		},
		{
			name:   "an empty plugin list",
			fx:     fixture{user: `{"plugins": ["guard", "time"]}`, project: `{"plugins": []}`},
			get:    func(c Config) any { return c.Plugins },
			want:   []string{"guard"},
			notice: `.shiro/config.json: "plugins" cannot turn off the guard: it stays on`,
		},
		{
			name:   "noSandbox",
			fx:     fixture{project: `{"sandbox": {"noSandbox": true}}`},
			get:    func(c Config) any { return c.Sandbox.NoSandbox },
			want:   false,
			notice: `.shiro/config.json: "sandbox.noSandbox" is ignored: a project cannot turn off the sandbox`,
		},
		{
			name:   "host environment names",
			fx:     fixture{project: `{"sandbox": {"env": ["AWS_SECRET_ACCESS_KEY", "CI=1"]}}`},
			get:    func(c Config) any { return c.Sandbox.Env },
			want:   []string{"CI=1"},
			notice: `.shiro/config.json: "sandbox.env" entry "AWS_SECRET_ACCESS_KEY" is ignored: a project cannot pass host environment variables into the sandbox (NAME=value constants are allowed)`,
		},
		{
			name:   "bridge over the user's none",
			fx:     fixture{user: `{"sandbox": {"network": "none"}}`, project: `{"sandbox": {"network": "bridge"}}`},
			get:    func(c Config) any { return c.Sandbox.Network },
			want:   "none",
			notice: `.shiro/config.json: "sandbox.network" "bridge" is ignored: a project can narrow the sandbox network, not widen it (yours is none)`,
		},
		{
			name:   "more memory than the default",
			fx:     fixture{project: `{"sandbox": {"memory": "64g"}}`},
			get:    func(c Config) any { return c.Sandbox.Memory },
			want:   int64(0), // the sandbox's default
			notice: `.shiro/config.json: "sandbox.memory" "64g" is ignored: a project can lower the sandbox's limits, not raise them (yours is 4g)`,
		},
		{
			name:   "more memory than the user's",
			fx:     fixture{user: `{"sandbox": {"memory": "1g"}}`, project: `{"sandbox": {"memory": "2048m", "pids": 512}}`},
			get:    func(c Config) any { return [2]int64{c.Sandbox.Memory, c.Sandbox.Pids} },
			want:   [2]int64{1 << 30, 512}, // lowering pids is fine
			notice: `.shiro/config.json: "sandbox.memory" "2048m" is ignored: a project can lower the sandbox's limits, not raise them (yours is 1g)`,
		},
		{
			name:   "more CPUs",
			fx:     fixture{project: `{"sandbox": {"cpus": 16, "memory": "1g"}}`},
			get:    func(c Config) any { return [2]any{c.Sandbox.CPUs, c.Sandbox.Memory} },
			want:   [2]any{0.0, int64(1 << 30)},
			notice: `.shiro/config.json: "sandbox.cpus" 16 is ignored: a project can lower the sandbox's limits, not raise them (yours is 2)`,
		},
		{
			name:   "more processes than the user's",
			fx:     fixture{user: `{"sandbox": {"pids": 100}}`, project: `{"sandbox": {"pids": 100000}}`},
			get:    func(c Config) any { return c.Sandbox.Pids },
			want:   int64(100),
			notice: `.shiro/config.json: "sandbox.pids" 100000 is ignored: a project can lower the sandbox's limits, not raise them (yours is 100)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, notices, err := tt.fx.load(t)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.get(cfg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			if want := []string{tt.notice}; !reflect.DeepEqual(notices, want) {
				t.Errorf("notices:\n got %q\nwant %q", notices, want)
			}
		})
	}
}

func TestLoadProjectSettingsOverriddenLaterNeedNoNotice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fx   fixture
		get  func(Config) any
		want any
	}{
		{
			name: "provider chosen by the environment",
			fx:   fixture{project: `{"provider": "openai"}`, env: map[string]string{"SHIRO_PROVIDER": "openai"}},
			get:  func(c Config) any { return c.Provider },
			want: "openai",
		},
		{
			name: "network chosen by a flag",
			fx:   fixture{user: `{"sandbox": {"network": "none"}}`, project: `{"sandbox": {"network": "bridge"}}`, flags: Overrides{Network: ptr("bridge")}},
			get:  func(c Config) any { return c.Sandbox.Network },
			want: "open",
		},
		{
			name: "network none by flag beats a project's bridge",
			fx:   fixture{project: `{"sandbox": {"network": "bridge"}}`, flags: Overrides{Network: ptr("none")}},
			get:  func(c Config) any { return c.Sandbox.Network },
			want: "none",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, notices, err := tt.fx.load(t)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.get(cfg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			if len(notices) != 0 {
				t.Errorf("notices: %q", notices)
			}
		})
	}
}

func TestLoadUnknownKeys(t *testing.T) {
	t.Parallel()
	fx := fixture{
		user:    `{"modle": "x", "Yolo": true, "sandbox": {"memroy": "1g"}}`,
		project: `{"agnet": "deep"}`,
	}
	opts := fx.options(t)
	cfg, notices, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Yolo {
		t.Error(`"Yolo" must not set yolo: keys are case-sensitive`)
	}
	user := opts.Paths.ConfigFile()
	want := []Notice{
		{File: user, Key: "modle", Message: `unknown key "modle" is ignored`},
		{File: user, Key: "Yolo", Message: `unknown key "Yolo" is ignored (did you mean "yolo"?)`},
		{File: user, Key: "sandbox.memroy", Message: `unknown key "sandbox.memroy" is ignored`},
		{File: ".shiro/config.json", Key: "agnet", Message: `unknown key "agnet" is ignored`},
	}
	if !reflect.DeepEqual(notices, want) {
		t.Errorf("got  %+v\nwant %+v", notices, want)
	}
}

func TestLoadToolSets(t *testing.T) {
	t.Parallel()
	known := []string{"core", "edit-plus", "git"}
	tests := []struct {
		name        string
		fx          fixture
		wantSets    []string
		wantPresent bool
		wantNotices []string
	}{
		{name: "absent means every set", fx: fixture{known: known}},
		{name: "empty means core only", fx: fixture{user: `{"toolSets": []}`, known: known}, wantSets: []string{}, wantPresent: true},
		{name: "named sets", fx: fixture{user: `{"toolSets": ["git"]}`, known: known}, wantSets: []string{"git"}, wantPresent: true},
		{
			name:        "unknown names are dropped with a notice",
			fx:          fixture{project: `{"toolSets": ["gti", "git"]}`, known: known},
			wantSets:    []string{"git"},
			wantPresent: true,
			wantNotices: []string{`.shiro/config.json: unknown tool set "gti" is ignored (known sets: core, edit-plus, git)`},
		},
		{
			name:        "only unknown names leave core only",
			fx:          fixture{user: `{"toolSets": ["nope"]}`, known: known},
			wantSets:    []string{},
			wantPresent: true,
		},
		{
			name:        "the flag replaces the files' list",
			fx:          fixture{user: `{"toolSets": ["git"]}`, flags: Overrides{ToolSets: &[]string{"edit-plus"}}, known: known},
			wantSets:    []string{"edit-plus"},
			wantPresent: true,
		},
		{
			name:        "without known names every name is kept",
			fx:          fixture{user: `{"toolSets": ["net"]}`},
			wantSets:    []string{"net"},
			wantPresent: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, notices, err := tt.fx.load(t)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.ToolSets, tt.wantSets) || cfg.ToolSetsPresent != tt.wantPresent {
				t.Errorf("got %#v present=%v, want %#v present=%v", cfg.ToolSets, cfg.ToolSetsPresent, tt.wantSets, tt.wantPresent)
			}
			if tt.wantNotices != nil && !reflect.DeepEqual(notices, tt.wantNotices) {
				t.Errorf("notices: got %q, want %q", notices, tt.wantNotices)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fx   fixture
		// want is the error text with USER standing for the user file.
		want string
	}{
		{
			name: "syntax error names the line and column",
			fx:   fixture{user: "{\n  \"model\": \"x\",\n}\n"},
			want: `USER:3:1: not valid JSON: invalid character '}' looking for beginning of object key string`,
		},
		{
			name: "unexpected end of input points at the end",
			fx:   fixture{user: "{\n  \"model\": \"x\"\n"},
			want: `USER:3:1: not valid JSON: unexpected end of JSON input`,
		},
		{
			name: "syntax error in the project file",
			fx:   fixture{project: "{\"model\" \"x\"}"},
			want: `.shiro/config.json:1:10: not valid JSON: invalid character '"' after object key`,
		},
		{
			name: "not an object",
			fx:   fixture{user: "\n [1]"},
			want: `USER:2:2: want a JSON object`,
		},
		{
			name: "wrong type names key and line",
			fx:   fixture{user: "{\n  \"maxRetries\": \"3\"\n}"},
			want: `USER:2:17: "maxRetries" must be a whole number, not a string`,
		},
		{
			name: "fraction where a whole number is due",
			fx:   fixture{user: `{"sandbox": {"pids": 1.5}}`},
			want: `USER:1:22: "sandbox.pids" must be a whole number`,
		},
		{
			name: "list of the wrong things",
			fx:   fixture{project: `{"toolSets": ["git", 1]}`},
			want: `.shiro/config.json:1:14: "toolSets" must be a list of strings`,
		},
		{
			name: "sandbox not an object",
			fx:   fixture{user: `{"sandbox": "docker"}`},
			want: `USER:1:13: "sandbox" must be an object, not a string`,
		},
		{
			name: "an MCP server not an object",
			fx:   fixture{user: `{"mcpServers": {"x": "npx foo"}}`},
			want: `USER:1:22: "mcpServers.x" must be an object, not a string`,
		},
		{
			name: "columns count characters",
			fx:   fixture{user: `{"model": "é", "yolo": 1}`},
			want: `USER:1:24: "yolo" must be true or false, not a number`,
		},
		{
			name: "invalid provider",
			fx:   fixture{user: "{\n\"provider\": \"foo\"}"},
			want: `USER:2:13: "provider" must be one of anthropic, openai, openai-compatible (got "foo")`,
		},
		{
			name: "invalid network",
			fx:   fixture{project: `{"sandbox": {"network": "x"}}`},
			want: `.shiro/config.json:1:25: "sandbox.network" must be one of ask, open, none, bridge (got "x")`,
		},
		{
			name: "invalid thinking",
			fx:   fixture{user: `{"thinking": "lots"}`},
			want: `USER:1:14: "thinking" must be one of off, low, medium, high, max (got "lots")`,
		},
		{
			name: "invalid memory",
			fx:   fixture{user: `{"sandbox": {"memory": "lots"}}`},
			want: `USER:1:24: "sandbox.memory" must be a size like 512m or 4g (got "lots")`,
		},
		{
			name: "negative retries",
			fx:   fixture{user: `{"maxRetries": -1}`},
			want: `USER:1:16: "maxRetries" must be 0 or more`,
		},
		{
			name: "zero cpus",
			fx:   fixture{user: `{"sandbox": {"cpus": 0}}`},
			want: `USER:1:22: "sandbox.cpus" must be more than 0`,
		},
		{
			name: "baseURL not a URL",
			fx:   fixture{user: `{"baseURL": "api.example.com"}`},
			want: `USER:1:13: "baseURL" must be an http or https URL`,
		},
		{
			name: "environment provider",
			fx:   fixture{env: map[string]string{"SHIRO_PROVIDER": "foo"}},
			want: `SHIRO_PROVIDER must be one of anthropic, openai, openai-compatible (got "foo")`,
		},
		{
			name: "environment base URL",
			fx:   fixture{env: map[string]string{"SHIRO_BASE_URL": "ftp://x"}},
			want: `SHIRO_BASE_URL must be an http or https URL`,
		},
		{
			name: "flags are all checked",
			fx:   fixture{flags: Overrides{Network: ptr("host"), Memory: ptr("0"), Pids: ptr(int64(-1))}},
			want: "--network must be one of ask, open, none, bridge (got \"host\")\n--memory must be a size like 512m or 4g (got \"0\")\n--pids must be more than 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := tt.fx.options(t)
			_, _, err := Load(opts)
			if err == nil {
				t.Fatal("no error")
			}
			want := strings.ReplaceAll(tt.want, "USER", opts.Paths.ConfigFile())
			if err.Error() != want {
				t.Errorf("got  %s\nwant %s", err, want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("%T is not a *config.Error", err)
			}
		})
	}
}

// TestSecretsNeverShown feeds secrets through every path that reports
// something and checks that no notice or error quotes them.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "SECRETVALUE"
	tests := []struct {
		name string
		fx   fixture
	}{
		{name: "project apiKey", fx: fixture{project: `{"apiKey": "SECRETVALUE"}`}},
		{name: "apiKey of the wrong type", fx: fixture{user: `{"apiKey": ["SECRETVALUE"]}`}},
		{name: "env entry with a bad name", fx: fixture{user: `{"sandbox": {"env": [" X=SECRETVALUE"]}}`}},
		{name: "env entry in a list of the wrong type", fx: fixture{user: `{"sandbox": {"env": ["A=SECRETVALUE", 3]}}`}},
		{name: "project env entry beside a refused name", fx: fixture{project: `{"sandbox": {"env": ["A=SECRETVALUE", "HOME"]}}`}},
		{name: "flag env entry with a bad name", fx: fixture{flags: Overrides{Env: []string{"=SECRETVALUE"}}}},
		{name: "base URL with credentials", fx: fixture{user: `{"baseURL": "ftp://me:SECRETVALUE@x"}`}},
		{name: "SHIRO_BASE_URL with credentials", fx: fixture{env: map[string]string{"SHIRO_BASE_URL": "me:SECRETVALUE@x"}}},
		{name: "syntax error after the key", fx: fixture{user: `{"apiKey": "SECRETVALUE" "model": 1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, notices, err := tt.fx.load(t)
			if err == nil && len(notices) == 0 {
				t.Fatal("expected an error or a notice to inspect")
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the secret: %v", err)
			}
			for _, n := range notices {
				if strings.Contains(n, secret) {
					t.Errorf("notice shows the secret: %s", n)
				}
			}
		})
	}
}

func TestLoadProjectFileThatIsNotAFile(t *testing.T) {
	t.Parallel()
	// outside is a directory beside the workspace with a config that
	// would change the model.
	symlink := func(target func(ws, outside string) string) func(t *testing.T, ws, outside, path string) {
		return func(t *testing.T, ws, outside, path string) {
			if err := os.Symlink(target(ws, outside), path); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		make   func(t *testing.T, ws, outside, path string)
		model  string // the model that results
		notice string
	}{
		{
			name: "a FIFO would block start-up",
			make: func(t *testing.T, _, _, path string) {
				if err := syscall.Mkfifo(path, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			notice: ".shiro/config.json: ignored: it is a FIFO",
		},
		{
			name:   "a symlink out of the workspace",
			make:   symlink(func(_, outside string) string { return filepath.Join(outside, "c.json") }),
			notice: ".shiro/config.json: ignored: it is a symlink that leaves the workspace",
		},
		{
			name:   "a symlink to /proc/self/environ",
			make:   symlink(func(_, _ string) string { return "/proc/self/environ" }),
			notice: ".shiro/config.json: ignored: it is a symlink that leaves the workspace",
		},
		{
			name: "a chain that ends outside",
			make: func(t *testing.T, ws, outside, path string) {
				if err := os.Symlink(filepath.Join(outside, "c.json"), filepath.Join(ws, "hop.json")); err != nil {
					t.Fatal(err)
				}
				symlink(func(_, _ string) string { return "../hop.json" })(t, ws, outside, path)
			},
			notice: ".shiro/config.json: ignored: it is a symlink that leaves the workspace",
		},
		{
			name: "a symlink that stays inside is followed",
			make: func(t *testing.T, ws, outside, path string) {
				if err := os.WriteFile(filepath.Join(ws, "team.json"), []byte(`{"model": "inside"}`), 0o644); err != nil {
					t.Fatal(err)
				}
				symlink(func(_, _ string) string { return "../team.json" })(t, ws, outside, path)
			},
			model: "inside",
		},
		{
			name: "a directory",
			make: func(t *testing.T, _, _, path string) {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			notice: ".shiro/config.json: ignored: it is a directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := fixture{}.options(t)
			if err := os.MkdirAll(filepath.Join(opts.Workspace, ".shiro"), 0o755); err != nil {
				t.Fatal(err)
			}
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "c.json"), []byte(`{"model": "outside"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			tt.make(t, opts.Workspace, outside, ProjectConfigFile(opts.Workspace))
			cfg, notices, err := Load(opts)
			if err != nil {
				t.Fatal(err)
			}
			want := cmp.Or(tt.model, "claude-sonnet-5-5")
			if cfg.Model != want {
				t.Errorf("model %q, want %q", cfg.Model, want)
			}
			var got []string
			for _, n := range notices {
				got = append(got, n.String())
			}
			var wantNotices []string
			if tt.notice != "" {
				wantNotices = []string{tt.notice}
			}
			if !slices.Equal(got, wantNotices) {
				t.Errorf("notices %q, want %q", got, wantNotices)
			}
		})
	}
}

func TestLoadProjectFileIsTheUserFile(t *testing.T) {
	t.Parallel()
	// SHIRO_HOME=<workspace>/.shiro: the file is the user's, read once and
	// trusted.
	ws := t.TempDir()
	dir := filepath.Join(ws, ".shiro")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"yolo": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	cfg, notices, err := Load(LoadOptions{Paths: Paths{ConfigDir: dir, DataDir: dir}, Workspace: ws, Root: root, Env: envMap(nil)})
	if err != nil || !cfg.Yolo || len(notices) != 0 {
		t.Fatalf("yolo=%v notices=%v err=%v", cfg.Yolo, notices, err)
	}
}

func TestLoadTooLarge(t *testing.T) {
	t.Parallel()
	big := `{"model": "` + strings.Repeat("x", maxFileSize) + `"}`
	_, _, err := fixture{project: big}.load(t)
	if err == nil || err.Error() != ".shiro/config.json: larger than 1024 KiB" {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadImageFromProject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fx          fixture
		wantImage   string
		wantProject bool
	}{
		{"set by the project", fixture{project: `{"sandbox": {"image": "./Dockerfile"}}`}, "./Dockerfile", true},
		{"set by the user", fixture{user: `{"sandbox": {"image": "/team/Dockerfile"}}`}, "/team/Dockerfile", false},
		{"the project's beats the user's", fixture{user: `{"sandbox": {"image": "a"}}`, project: `{"sandbox": {"image": "devcontainer"}}`}, "devcontainer", true},
		{"a flag beats the project's", fixture{project: `{"sandbox": {"image": "../x/Dockerfile"}}`, flags: Overrides{Image: ptr("./Dockerfile")}}, "./Dockerfile", false},
		{"the project sets other sandbox keys only", fixture{user: `{"sandbox": {"image": "u"}}`, project: `{"sandbox": {"pids": 100}}`}, "u", false},
		{"nobody sets it", fixture{}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, _, err := tt.fx.load(t)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Sandbox.Image != tt.wantImage || cfg.Sandbox.ImageFromProject != tt.wantProject {
				t.Errorf("image %q from project %v, want %q %v", cfg.Sandbox.Image, cfg.Sandbox.ImageFromProject, tt.wantImage, tt.wantProject)
			}
		})
	}
}

// The agent variant and thinking level: flags > config files > the
// variant's own level (Thinking "" leaves it to the variant).
func TestLoadAgentAndThinking(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fx              fixture
		agent, thinking string
	}{
		{fixture{}, "default", ""},
		{fixture{user: `{"agent": "plan"}`}, "plan", ""},
		{fixture{user: `{"agent": "plan", "thinking": "low"}`}, "plan", "low"},
		{fixture{user: `{"agent": "plan", "thinking": "low"}`, flags: Overrides{Agent: ptr("deep"), Thinking: ptr("max")}}, "deep", "max"},
		{fixture{project: `{"agent": "review"}`}, "review", ""},
	}
	for _, c := range cases {
		cfg, _, err := c.fx.load(t)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Agent != c.agent || cfg.Thinking != c.thinking {
			t.Errorf("%+v: agent %q thinking %q, want %q %q", c.fx, cfg.Agent, cfg.Thinking, c.agent, c.thinking)
		}
	}
	for _, c := range []struct {
		fx   fixture
		want string
	}{
		{fixture{flags: Overrides{Agent: ptr("fast")}}, `Unknown agent "fast". Available: default, quick, deep, plan, review`},
		{fixture{flags: Overrides{Thinking: ptr("lots")}}, `Unknown thinking level "lots". Available: off, low, medium, high, max`},
		{fixture{user: `{"agent": "fast"}`}, `"agent" must be one of default, quick, deep, plan, review (got "fast")`},
	} {
		_, _, err := c.fx.load(t)
		if err == nil || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("err = %v, want %s", err, c.want)
		}
	}
}

func TestLoadTrustPaths(t *testing.T) {
	t.Parallel()
	cfg, notices, err := fixture{user: `{"trust": {"paths": ["~/work/*", "/srv/repo"]}}`}.load(t)
	if err != nil || !slices.Equal(cfg.TrustPaths, []string{"~/work/*", "/srv/repo"}) || len(notices) != 0 {
		t.Fatalf("user trust.paths: %v %v %v", cfg.TrustPaths, notices, err)
	}
	// A project cannot trust itself.
	cfg, notices, err = fixture{project: `{"trust": {"paths": ["/**"]}}`}.load(t)
	if err != nil || cfg.TrustPaths != nil || len(notices) != 1 || !strings.Contains(notices[0], "a project cannot trust itself") {
		t.Fatalf("project trust.paths: %v %v %v", cfg.TrustPaths, notices, err)
	}
	if _, _, err := (fixture{user: `{"trust": {"paths": "/x"}}`}).load(t); err == nil || !strings.Contains(err.Error(), "trust.paths") {
		t.Fatalf("a string for trust.paths: %v", err)
	}
}
