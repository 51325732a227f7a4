package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestResolvePaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		env        map[string]string
		wantConfig string
		wantData   string
	}{
		{
			name:       "SHIRO_HOME relocates everything",
			env:        map[string]string{"SHIRO_HOME": "/tmp/sh", "HOME": "/home/u", "XDG_CONFIG_HOME": "/x/cfg"},
			wantConfig: "/tmp/sh", wantData: "/tmp/sh",
		},
		{
			name:       "XDG directories",
			env:        map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/x/cfg", "XDG_DATA_HOME": "/x/data"},
			wantConfig: "/x/cfg/shiro", wantData: "/x/data/shiro",
		},
		{
			name:       "XDG defaults under HOME",
			env:        map[string]string{"HOME": "/home/u"},
			wantConfig: "/home/u/.config/shiro", wantData: "/home/u/.local/share/shiro",
		},
		{
			name:       "relative XDG values are ignored",
			env:        map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "rel", "XDG_DATA_HOME": ""},
			wantConfig: "/home/u/.config/shiro", wantData: "/home/u/.local/share/shiro",
		},
		{
			name:       "empty SHIRO_HOME is unset",
			env:        map[string]string{"HOME": "/home/u", "SHIRO_HOME": ""},
			wantConfig: "/home/u/.config/shiro", wantData: "/home/u/.local/share/shiro",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ResolvePaths(envMap(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if p.ConfigDir != tt.wantConfig || p.DataDir != tt.wantData {
				t.Errorf("got %+v, want config %s data %s", p, tt.wantConfig, tt.wantData)
			}
			if got, want := p.ConfigFile(), filepath.Join(tt.wantConfig, "config.json"); got != want {
				t.Errorf("ConfigFile = %s, want %s", got, want)
			}
			if got, want := p.SessionsDir(), filepath.Join(tt.wantData, "sessions"); got != want {
				t.Errorf("SessionsDir = %s, want %s", got, want)
			}
		})
	}
}

func TestResolvePathsWithoutHome(t *testing.T) {
	t.Parallel()
	_, err := ResolvePaths(envMap(nil))
	if err == nil || !strings.Contains(err.Error(), "HOME is not set") {
		t.Fatalf("err = %v, want HOME is not set", err)
	}
	// XDG alone is enough for neither directory's fallback, but both set is.
	p, err := ResolvePaths(envMap(map[string]string{"XDG_CONFIG_HOME": "/c", "XDG_DATA_HOME": "/d"}))
	if err != nil || p.ConfigDir != "/c/shiro" || p.DataDir != "/d/shiro" {
		t.Fatalf("got %+v, %v", p, err)
	}
}

func TestProjectKey(t *testing.T) {
	t.Parallel()
	// printf '%s' /home/u/project | sha256sum | cut -c1-16
	if got := ProjectKey("/home/u/project"); got != "4eb6cd28fb98b739" {
		t.Errorf("ProjectKey = %s", got)
	}
	if ProjectKey("/a") == ProjectKey("/b") {
		t.Error("different paths share a key")
	}
}
