package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSave(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing string // "" means no file
		edit     func(doc map[string]any) error
		want     string
	}{
		{
			name: "creates the file",
			edit: func(doc map[string]any) error { doc["model"] = "m"; return nil },
			want: "{\n  \"model\": \"m\"\n}\n",
		},
		{
			name:     "keeps unrelated keys, nested values and exact numbers",
			existing: `{"presetId":"x","compactThreshold":120000,"sandbox":{"cpus":1.50,"image":"a<b>"},"mcpServers":{"s":{"command":"c"}}}`,
			edit: func(doc map[string]any) error {
				doc["provider"] = "openai"
				doc["apiKey"] = "k"
				return nil
			},
			want: `{
  "apiKey": "k",
  "compactThreshold": 120000,
  "mcpServers": {
    "s": {
      "command": "c"
    }
  },
  "presetId": "x",
  "provider": "openai",
  "sandbox": {
    "cpus": 1.50,
    "image": "a<b>"
  }
}
`,
		},
		{
			name:     "edits nested objects",
			existing: `{"sandbox": {"image": "a"}}`,
			edit: func(doc map[string]any) error {
				doc["sandbox"].(map[string]any)["network"] = "none"
				return nil
			},
			want: "{\n  \"sandbox\": {\n    \"image\": \"a\",\n    \"network\": \"none\"\n  }\n}\n",
		},
		{
			name:     "the edit may fix a bad value",
			existing: `{"provider": "foo"}`,
			edit:     func(doc map[string]any) error { doc["provider"] = "anthropic"; return nil },
			want:     "{\n  \"provider\": \"anthropic\"\n}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "shiro")
			p := Paths{ConfigDir: dir, DataDir: dir}
			if tt.existing != "" {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p.ConfigFile(), []byte(tt.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := Save(p, tt.edit); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p.ConfigFile())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			fi, err := os.Stat(p.ConfigFile())
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}
			if tt.existing == "" {
				di, err := os.Stat(dir)
				if err != nil {
					t.Fatal(err)
				}
				if di.Mode().Perm() != 0o700 {
					t.Errorf("dir mode %v, want 0700", di.Mode().Perm())
				}
			}
			assertOnlyConfig(t, dir)
			if _, _, err := Load(LoadOptions{Paths: p, Env: envMap(nil)}); err != nil {
				t.Errorf("the saved file does not load: %v", err)
			}
		})
	}
}

func TestSaveLeavesTheFileAloneOnFailure(t *testing.T) {
	t.Parallel()
	editErr := errors.New("cancelled")
	tests := []struct {
		name     string
		existing string
		edit     func(doc map[string]any) error
		want     string
	}{
		{
			name:     "malformed file",
			existing: "{\"model\": }",
			edit:     func(doc map[string]any) error { return nil },
			want:     "save config: CONFIG:1:11: not valid JSON: invalid character '}' looking for beginning of value",
		},
		{
			name:     "the edit fails",
			existing: `{"model": "m"}`,
			edit:     func(doc map[string]any) error { return editErr },
			want:     "save config: cancelled",
		},
		{
			name:     "the result would be invalid",
			existing: `{"model": "m"}`,
			edit:     func(doc map[string]any) error { doc["sandbox"] = map[string]any{"network": "host"}; return nil },
			want:     `save config: refusing to write an invalid file: "sandbox.network" must be one of ask, open, none, bridge (got "host")`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := Paths{ConfigDir: dir, DataDir: dir}
			if err := os.WriteFile(p.ConfigFile(), []byte(tt.existing), 0o600); err != nil {
				t.Fatal(err)
			}
			err := Save(p, tt.edit)
			if err == nil {
				t.Fatal("no error")
			}
			if want := strings.ReplaceAll(tt.want, "CONFIG", p.ConfigFile()); err.Error() != want {
				t.Errorf("got  %v\nwant %s", err, want)
			}
			got, _ := os.ReadFile(p.ConfigFile())
			if string(got) != tt.existing {
				t.Errorf("file changed to %q", got)
			}
			assertOnlyConfig(t, dir)
		})
	}
}

// TestSaveReplacesByRename checks that Save replaces the file (a new inode
// renamed over it) rather than rewriting it in place, where a crash or a
// concurrent reader could see half a file.
func TestSaveReplacesByRename(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := Paths{ConfigDir: dir, DataDir: dir}
	if err := os.WriteFile(p.ConfigFile(), []byte(`{"model": "old"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(p.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	// Keep the old file open: after an atomic replace it still reads the
	// old content, as a concurrent reader would.
	old, err := os.Open(p.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := Save(p, func(doc map[string]any) error { doc["model"] = "new"; return nil }); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(p.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Error("the file was rewritten in place, not replaced")
	}
	buf := make([]byte, 64)
	n, _ := old.Read(buf)
	if string(buf[:n]) != `{"model": "old"}` {
		t.Errorf("the old file reads %q", buf[:n])
	}
	assertOnlyConfig(t, dir)
}

func assertOnlyConfig(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "config.json" {
			t.Errorf("left behind %s", e.Name())
		}
	}
}
