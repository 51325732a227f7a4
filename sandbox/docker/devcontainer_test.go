package docker

import (
	"slices"
	"strings"
	"testing"
)

func TestParseDevcontainer(t *testing.T) {
	t.Parallel()
	const ws = "/home/dev/proj"
	tests := []struct {
		name        string
		file        string
		check       func(t *testing.T, dc *devcontainer)
		wantNotices []string // substrings, one notice each, in order
	}{
		{
			name: "an image with comments and trailing commas",
			file: "{\n // the team image\n \"image\": \"golang:1.22\", /* pinned */\n}",
			check: func(t *testing.T, dc *devcontainer) {
				if dc.Image != "golang:1.22" || dc.Dockerfile != "" {
					t.Errorf("image %q dockerfile %q", dc.Image, dc.Dockerfile)
				}
			},
		},
		{
			name: "a build with args, target and variables",
			file: `{"build": {"dockerfile": "Dockerfile", "context": "..", "target": "dev",
				"args": {"A": "1", "WS": "${localWorkspaceFolderBasename}", "DIR": "${containerWorkspaceFolder}/x"}}}`,
			check: func(t *testing.T, dc *devcontainer) {
				if dc.Dockerfile != "Dockerfile" || dc.Context != ".." || dc.Target != "dev" {
					t.Errorf("dockerfile %q context %q target %q", dc.Dockerfile, dc.Context, dc.Target)
				}
				got := map[string]string{}
				for k, v := range dc.Args {
					got[k] = *v
				}
				if got["A"] != "1" || got["WS"] != "proj" || got["DIR"] != "/home/dev/proj/x" {
					t.Errorf("args %v", got)
				}
			},
		},
		{
			name: "the older top-level dockerFile, context defaulting to the file's directory",
			file: `{"dockerFile": "../Dockerfile"}`,
			check: func(t *testing.T, dc *devcontainer) {
				if dc.Dockerfile != "../Dockerfile" || dc.Context != "." {
					t.Errorf("dockerfile %q context %q", dc.Dockerfile, dc.Context)
				}
			},
		},
		{
			name: "fields that run code on the host or widen the sandbox are named",
			file: `{"image": "x", "initializeCommand": "touch /tmp/pwned", "runArgs": ["--privileged"],
				"mounts": ["source=/,target=/host,type=bind"], "privileged": true, "capAdd": ["SYS_ADMIN"],
				"securityOpt": ["seccomp=unconfined"], "postCreateCommand": "make", "features": {"x": {}}}`,
			wantNotices: []string{`"initializeCommand" is not run: it would run a command on your machine`, `"runArgs" is ignored`,
				`"mounts" is ignored`, `"privileged" is ignored`, `"capAdd" is ignored`, `"securityOpt" is ignored`,
				`"features" are not installed`, `"postCreateCommand" is not run: it would run without your approval`},
		},
		{
			name: "fields set to nothing are not worth a notice",
			file: `{"image": "x", "privileged": false, "runArgs": [], "mounts": null, "capAdd": [], "forwardPorts": [3000], "customizations": {"vscode": {}}}`,
		},
		{
			name:        "remoteUser is explained",
			file:        `{"image": "x", "remoteUser": "vscode"}`,
			wantNotices: []string{`"remoteUser" "vscode" is not used: commands run as your own uid and gid`},
		},
		{
			name: "localEnv is never read: its default is used, with a notice naming only the variable",
			file: `{"image": "x", "containerEnv": {"TOKEN": "${localEnv:GITHUB_TOKEN}", "V": "${localEnv:VERSION:3.11}"}}`,
			check: func(t *testing.T, dc *devcontainer) {
				if dc.ContainerEnv["TOKEN"] != "" || dc.ContainerEnv["V"] != "3.11" {
					t.Errorf("env %v", dc.ContainerEnv)
				}
			},
			wantNotices: []string{`"containerEnv.TOKEN": ${localEnv:GITHUB_TOKEN} is not expanded`, `"containerEnv.V": ${localEnv:VERSION} is not expanded`},
		},
		{
			name: "a UTF-8 byte order mark at the start",
			file: "\ufeff{\"image\": \"golang:1.22\"}",
			check: func(t *testing.T, dc *devcontainer) {
				if dc.Image != "golang:1.22" {
					t.Errorf("image %q", dc.Image)
				}
			},
		},
		{
			name: "known variables in build args are still expanded, localEnv with a notice",
			file: `{"build": {"dockerfile": "Dockerfile", "args": {"WS": "${localWorkspaceFolder}", "T": "${localEnv:TOKEN:none}"}}}`,
			check: func(t *testing.T, dc *devcontainer) {
				if *dc.Args["WS"] != "/home/dev/proj" || *dc.Args["T"] != "none" {
					t.Errorf("args WS %q T %q", *dc.Args["WS"], *dc.Args["T"])
				}
			},
			wantNotices: []string{`"build.args.T": ${localEnv:TOKEN} is not expanded`},
		},
		{
			name: "a Compose devcontainer names its files and service",
			file: `{"dockerComposeFile": ["../compose.yml", "compose.${localWorkspaceFolderBasename}.yml"], "service": "app", "runServices": ["app", "db"], "image": "x"}`,
			check: func(t *testing.T, dc *devcontainer) {
				if !slices.Equal(dc.ComposeFiles, []string{"../compose.yml", "compose.proj.yml"}) || dc.Service != "app" || dc.Image != "" {
					t.Errorf("files %q service %q image %q", dc.ComposeFiles, dc.Service, dc.Image)
				}
			},
			wantNotices: []string{`"runServices" is ignored: shiro runs only the "app" service's image`, `"image" and "build" are ignored: the Compose service "app" gives the image`},
		},
		{
			name: "image and build together: the build wins",
			file: `{"image": "x", "build": {"dockerfile": "Dockerfile"}}`,
			check: func(t *testing.T, dc *devcontainer) {
				if dc.Image != "" || dc.Dockerfile != "Dockerfile" {
					t.Errorf("image %q dockerfile %q", dc.Image, dc.Dockerfile)
				}
			},
			wantNotices: []string{`"image" is ignored`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dc, err := parseDevcontainer([]byte(tc.file), "devcontainer.json", ws)
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, dc)
			}
			if len(dc.Notices) != len(tc.wantNotices) {
				t.Fatalf("notices:\n%s\nwant %d", strings.Join(dc.Notices, "\n"), len(tc.wantNotices))
			}
			for i, want := range tc.wantNotices {
				if !strings.Contains(dc.Notices[i], want) || !strings.HasPrefix(dc.Notices[i], "devcontainer.json: ") {
					t.Errorf("notice %d is %q, want it to contain %q", i, dc.Notices[i], want)
				}
			}
		})
	}
}

func TestParseDevcontainerErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, file, want string }{
		{"neither image nor build", `{"name": "x"}`, `names neither "image" nor "build.dockerfile"`},
		{"compose without a service", `{"dockerComposeFile": "compose.yml"}`, `"dockerComposeFile" is set but "service" is not`},
		{"compose files of the wrong type", `{"dockerComposeFile": 3, "service": "app"}`, `"dockerComposeFile" must be a string or an array of strings`},
		{"a template placeholder in the image", `{"image": "mcr.microsoft.com/devcontainers/python:${templateOption:imageVariant}"}`,
			`"image": ${templateOption:imageVariant} is a template placeholder`},
		{"a template placeholder in a build arg", `{"build": {"dockerfile": "Dockerfile", "args": {"VARIANT": "${templateOption:variant}"}}}`,
			`"build.args.VARIANT": ${templateOption:variant} is a template placeholder`},
		{"an unknown variable in a build arg", `{"build": {"dockerfile": "Dockerfile", "args": {"NODE": "${nodeVersion}"}}}`,
			`"build.args.NODE": unknown variable ${nodeVersion}`},
		{"a BOM does not hide a syntax error", "\ufeff{\n \"image\": }", "line 2"},
		{"a syntax error names its line", "{\n \"image\": \"x\"\n \"build\": {}\n}", "line 3"},
		{"a wrong type", `{"image": 42}`, `"image" must be a string, not number`},
		{"a bad variable name", `{"image": "x", "containerEnv": {"A=B": "c"}}`, "is not a variable name"},
		{"too large", `{"image": "` + strings.Repeat("x", maxDevcontainerSize) + `"}`, "larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseDevcontainer([]byte(tc.file), "dc.json", "/w")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDevcontainerEnv(t *testing.T) {
	t.Parallel()
	dc, err := parseDevcontainer([]byte(`{"image": "x",
		"containerEnv": {"PATH": "/opt/bin:${containerEnv:PATH}", "GOFLAGS": "-mod=mod", "DROP": "1", "MISSING": "${containerEnv:NOPE:fallback}"},
		"remoteEnv": {"DROP": null, "LABEL": "${containerEnv:GOFLAGS}!"}}`), "dc.json", "/w")
	if err != nil {
		t.Fatal(err)
	}
	got := dc.env([]string{"PATH=/usr/bin:/bin", "HOME=/root"})
	want := []string{"GOFLAGS=-mod=mod", "LABEL=-mod=mod!", "MISSING=fallback", "PATH=/opt/bin:/usr/bin:/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("env %q, want %q", got, want)
	}
}
