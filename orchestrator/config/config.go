// Package config turns shiro's configuration sources into one validated
// Config: built-in defaults, the user's file, the workspace's
// .shiro/config.json, SHIRO_* environment variables and command-line flags,
// in rising precedence.
//
// The project file comes with the repository and is untrusted: it may pick
// the model, the image and the tool sets, but it cannot turn approvals or
// the guard off, leave the sandbox, choose the API key or where it is sent,
// or pass host environment variables into the sandbox. Each refused setting
// becomes a Notice. Its MCP servers are kept apart (ProjectMCPServers) so
// that they are started inside the sandbox.
//
// Neither notices nor errors ever quote the API key or an environment
// entry's value.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/sandbox"
)

// Providers.
const (
	ProviderAnthropic        = "anthropic"
	ProviderOpenAI           = "openai"
	ProviderOpenAICompatible = "openai-compatible"
)

// Sandbox networks: ask (the default) sends every connection through
// shiro's egress proxy, host by host; open is Docker's bridge ("bridge" is
// read as open); none has no network.
const (
	NetworkAsk    = "ask"
	NetworkOpen   = "open"
	NetworkBridge = "bridge"
	NetworkNone   = "none"
)

// Defaults.
const (
	DefaultProvider         = ProviderAnthropic
	DefaultMaxRetries       = 3
	DefaultCompactThreshold = 120000
	// guardPlugin is the plugin a project file cannot switch off.
	guardPlugin = "guard"
)

// DefaultPlugins are the plugins on when no source names any.
var DefaultPlugins = []string{guardPlugin, "time"}

// DefaultModel is the model of each provider when none is configured
// (openai-compatible has none: the server decides what exists).
var DefaultModel = map[string]string{
	ProviderAnthropic: "claude-sonnet-5-5",
	ProviderOpenAI:    "gpt-5",
}

// DefaultBaseURL is the API root of each provider when none is configured
// (openai-compatible needs one).
var DefaultBaseURL = map[string]string{
	ProviderAnthropic: "https://api.anthropic.com/v1",
	ProviderOpenAI:    "https://api.openai.com/v1",
}

var (
	providers = []string{ProviderAnthropic, ProviderOpenAI, ProviderOpenAICompatible}
	networks  = []string{NetworkAsk, NetworkOpen, NetworkNone, NetworkBridge}
	thinkings = []string{"off", "low", "medium", "high", "max"}
	// openaiAPIs choose the OpenAI protocol: auto (the official endpoint's
	// chat → responses fallback; chat completions elsewhere), chat, responses.
	openaiAPIs = []string{"auto", "chat", "responses"}
)

// Config is the resolved configuration of a session.
type Config struct {
	// Provider is anthropic, openai or openai-compatible.
	Provider string
	Model    string
	// BaseURL is the API root; it never comes from a project file.
	BaseURL string
	// APIKey may be empty (openai-compatible servers often need none; for
	// the others the front end asks for one). Never print it.
	APIKey string
	// PresetID is the onboarding preset the provider was chosen from
	// ("" when none): see Presets.
	PresetID   string
	MaxRetries int
	// ToolSets are the optional tool sets named by the toolSets key, with
	// unknown names dropped. ToolSetsPresent is false when no source set the
	// key, which means every set; present and empty means core only.
	ToolSets        []string
	ToolSetsPresent bool
	// Plugins are the enabled built-in plugins, in order.
	Plugins []string
	// Yolo skips approval prompts (the guard still runs). Only the user's
	// file and flags can set it.
	Yolo bool
	// Agent is the agent variant: default, quick, deep, plan or review.
	Agent string
	// Thinking is off, low, medium, high or max; empty means the agent
	// variant's default.
	Thinking string
	// OpenAIAPI is auto (or empty), chat or responses (openaiAPI,
	// SHIRO_OPENAI_API): which OpenAI protocol to speak.
	OpenAIAPI string
	Sandbox   Sandbox
	// MCPServers are the user's servers (run on the host), name → the
	// server's JSON object.
	MCPServers map[string]json.RawMessage
	// ProjectMCPServers are the project file's servers; they must run in
	// the sandbox.
	ProjectMCPServers map[string]json.RawMessage
	// CompactThreshold is the estimated token count that triggers
	// compaction.
	CompactThreshold int
	// TrustPaths are the user's trust.paths: workspaces (absolute paths,
	// ~/ paths or glob patterns) whose project asks (MCP servers, image
	// builds) are trusted without a question. Only the user's file sets it.
	TrustPaths []string
	// WorktreesDir is the user's worktrees.dir: the folder of --worktree
	// agents' worktrees, absolute or ~/ (empty: the data directory's).
	WorktreesDir string
	// Network holds the host rules of the egress proxy (ask mode).
	Network NetworkRules
}

// NetworkRules are the allow and deny patterns of the egress proxy, each
// with where it came from.
type NetworkRules struct {
	Allow []HostRule
	Deny  []HostRule
	// Credentials are the headers the proxy adds per host (user file only).
	Credentials []Credential
}

// HostRule is one host pattern ("example.com", "*.example.com",
// "host:port", an address) and its source.
type HostRule struct {
	Pattern string
	Source  string
}

// APIKeyRequired reports whether the provider needs a key
// (openai-compatible servers may be keyless).
func (c Config) APIKeyRequired() bool { return c.Provider != ProviderOpenAICompatible }

// Sandbox configures the container: the sandbox's own Settings type, so
// that what Load resolves reaches the engine without being copied field by
// field. Zero limits mean the sandbox's defaults; Load does not set Idle
// (a flag of the commands that open a sandbox).
type Sandbox = sandbox.Settings

// Overrides are the command-line flags; nil means the flag was not given.
type Overrides struct {
	Provider *string
	Model    *string
	BaseURL  *string
	Thinking *string
	Agent    *string
	Yolo     *bool
	ToolSets *[]string
	// Plugins replaces the plugin list (--no-plugins is an empty list: the
	// user may turn the guard off, a project may not).
	Plugins   *[]string
	Image     *string
	Network   *string
	Memory    *string
	CPUs      *float64
	Pids      *int64
	NoSandbox *bool
	// Backend, WorkspaceMode, KubeContext, Namespace and StorageClass are
	// --backend, --workspace, --kube-context, --namespace and
	// --storage-class.
	Backend       *string
	WorkspaceMode *string
	KubeContext   *string
	Namespace     *string
	StorageClass  *string
	// ImagePullSecret is --image-pull-secret.
	ImagePullSecret *string
	// Env is appended to the configured entries.
	Env []string
	// BuildSecrets are --build-secret entries, added to
	// sandbox.buildSecrets.
	BuildSecrets []string
	// AllowHosts are --allow-host patterns, added to network.allow.
	AllowHosts []string
	// Publish are --publish mappings, added to sandbox.publish (a host
	// port given again takes the flag's container port), and
	// PublishAddress is --publish-address.
	Publish        []string
	PublishAddress *string
}

// Notice is a warning about the configuration: an unknown key, a refused
// project setting, an unknown tool set. Loading goes on.
type Notice struct {
	// File is the file the notice is about, as shown to the user.
	File string
	// Key is the config key, dotted for nested keys ("sandbox.env").
	Key     string
	Message string
}

func (n Notice) String() string {
	if n.File == "" {
		return n.Message
	}
	return n.File + ": " + n.Message
}

// Error is a configuration error with where it was found. Line and Column
// are 1-based and zero when unknown; Key is empty for syntax errors.
type Error struct {
	File   string
	Line   int
	Column int
	Key    string
	Err    error
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Column)
	}
	if loc == "" {
		return e.Err.Error()
	}
	return loc + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Save edits the user's config file: it reads the file (an absent file is
// an empty object), lets edit change the document, checks that the result
// is still a valid configuration, and writes it back pretty-printed with a
// trailing newline, atomically and with mode 0600 (it may hold an API key).
// Keys edit does not touch are kept (in sorted order). doc is the file as
// encoding/json decodes it (numbers as json.Number): untyped, since edit
// may write any key, known or not, and the result is checked as a file.
func Save(p Paths, edit func(doc map[string]any) error) error {
	if p.ConfigDir == "" {
		return errors.New("save config: no config directory")
	}
	file := p.ConfigFile()
	doc := map[string]any{}
	data, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("save config: %w", err)
	case len(bytes.TrimSpace(data)) > 0:
		// Only the syntax must be sound: edit may be what fixes a bad value.
		if err := checkSyntax(data, file); err != nil {
			return fmt.Errorf("save config: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // keep numbers exactly as written
		if err := dec.Decode(&doc); err != nil {
			return fmt.Errorf("save config: %w", err)
		}
	}
	if err := edit(doc); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	if _, err := parseFile(buf.Bytes(), file, newState(), fromUser); err != nil {
		// The position would be in a file that was never written.
		if ce, ok := errors.AsType[*Error](err); ok {
			err = ce.Err
		}
		return fmt.Errorf("save config: refusing to write an invalid file: %w", err)
	}
	if err := atomicfile.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	return nil
}
