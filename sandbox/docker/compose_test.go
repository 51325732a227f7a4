package docker

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// composeWorkspace is a workspace with a Compose devcontainer whose
// compose.yml is given, beside the files of extra.
func composeWorkspace(t *testing.T, compose string, extra map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	files := map[string]string{
		".devcontainer/devcontainer.json": `{"name": "c", "dockerComposeFile": "compose.yml", "service": "app", "workspaceFolder": "/workspaces/c"}`,
		".devcontainer/compose.yml":       compose,
	}
	for k, v := range extra {
		files[k] = v
	}
	writeTree(t, ws, files)
	return ws
}

func TestComposeDevcontainerImage(t *testing.T) {
	t.Parallel()
	ws := composeWorkspace(t, `
version: "3.8"
services:
  app:
    image: "golang:${GO_VERSION:-1.22}"
    environment:
      A: "1"
      TAG: ${TAG}
      FROM_HOST:
    env_file: [app.env]
    ports: ["8080:8080"]
    volumes: ["..:/workspaces/c:cached", "/var/run/docker.sock:/var/run/docker.sock"]
    privileged: true
    network_mode: host
    working_dir: /workspaces/c
    user: vscode
    command: sleep infinity
  db:
    image: postgres:16
`, map[string]string{
		".devcontainer/.env":    "TAG=v1\n",
		".devcontainer/app.env": "A=from-file\nB=2\n",
	})
	eng := newFakeEngine()
	var progress strings.Builder
	res, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "devcontainer", Workspace: ws, Root: openRoot(t, ws), FromProject: true, Progress: &progress}, &imageBuilds{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ref != "golang:1.22" || !res.Pulled {
		t.Errorf("ref %q pulled %v", res.Ref, res.Pulled)
	}
	if want := []string{"A=1", "B=2", "TAG=v1"}; !slices.Equal(res.Env, want) {
		t.Errorf("env %q, want %q", res.Env, want)
	}
	for _, want := range []string{
		`.devcontainer/compose.yml: "services.app.command" is ignored`,
		`"services.app.network_mode" is ignored`,
		`"services.app.ports" is ignored: the sandbox publishes no ports`,
		`"services.app.privileged" is ignored: the sandbox is never privileged`,
		`"services.app.volumes" is ignored: a repository cannot add mounts`,
		`services "db" are not started: shiro runs only the "app" service's image, as its sandbox; running the other services of a Compose file is not supported`,
		`"services.app.user" "vscode" is not used`,
		`"services.app.working_dir" "/workspaces/c" is not used`,
		`"services.app.environment.FROM_HOST" has no value`,
		`.devcontainer/devcontainer.json: "workspaceFolder" is ignored`,
	} {
		if !slices.ContainsFunc(res.Notices, func(n string) bool { return strings.Contains(n, want) }) {
			t.Errorf("no notice %q in:\n%s", want, strings.Join(res.Notices, "\n"))
		}
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q", want)
		}
	}
}

func TestComposeDevcontainerBuild(t *testing.T) {
	t.Parallel()
	ws := composeWorkspace(t, `
services:
  app:
    extends:
      file: base.yml
      service: base
    build:
      args:
        V: "3"
        UNSET:
      target: dev
`, map[string]string{
		".devcontainer/base.yml": `
services:
  base:
    build:
      context: ..
      dockerfile: .devcontainer/Dockerfile
    environment:
      FROM_BASE: "yes"
`,
		".devcontainer/Dockerfile": "FROM x\nARG V\n",
		"src/main.go":              "package main",
	})
	eng := newFakeEngine()
	res, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "devcontainer", Workspace: ws, Root: openRoot(t, ws), FromProject: true}, &imageBuilds{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Built || len(eng.builds) != 1 {
		t.Fatalf("built %v, %d builds", res.Built, len(eng.builds))
	}
	b := eng.builds[0]
	if b.Dockerfile != ".devcontainer/Dockerfile" || b.Target != "dev" || b.BuildArgs["V"] == nil || *b.BuildArgs["V"] != "3" {
		t.Errorf("build options: dockerfile %q target %q args %v", b.Dockerfile, b.Target, b.BuildArgs)
	}
	if _, ok := b.BuildArgs["UNSET"]; ok {
		t.Error("an argument without a value was passed")
	}
	if _, ok := eng.contexts[0]["src/main.go"]; !ok {
		t.Error("the context is not the workspace")
	}
	if !slices.Equal(res.Env, []string{"FROM_BASE=yes"}) {
		t.Errorf("env %q", res.Env)
	}
}

func TestComposeReadsOnlyTheWorkspace(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	const secret = "TOP_SECRET_VALUE"
	writeTree(t, outside, map[string]string{
		"secret.env":  "S=" + secret + "\n",
		"base.yml":    "services:\n  base:\n    image: alpine\n    environment:\n      S: " + secret + "\n",
		"inc.yml":     "services:\n  app:\n    image: alpine\n    environment:\n      S: " + secret + "\n",
		"inc/.env":    "S=" + secret + "\n",
		"inc/app.yml": "services:\n  app:\n    image: \"alpine:${S:-x}\"\n",
		"Dockerfile":  "FROM x\n",
	})
	rel, err := filepath.Rel(filepath.Join(t.TempDir(), "ws", ".devcontainer"), outside)
	if err != nil {
		t.Fatal(err)
	}
	_ = rel
	tests := []struct {
		name    string
		compose string
		extra   map[string]string
		want    string
	}{
		{"an env_file outside by its absolute path", "services:\n  app:\n    image: alpine\n    env_file: " + filepath.Join(outside, "secret.env") + "\n", nil,
			`"services.app.env_file": "` + filepath.Join(outside, "secret.env") + `" is outside the workspace`},
		{"an env_file outside by ..", "services:\n  app:\n    image: alpine\n    env_file: ../../../../../../../../../../.." + filepath.Join(outside, "secret.env") + "\n", nil,
			"outside the workspace"},
		{"an env_file through a symlink out", "services:\n  app:\n    image: alpine\n    env_file: link.env\n",
			map[string]string{".devcontainer/link.env": "->" + filepath.Join(outside, "secret.env")}, "symlink that leaves the workspace"},
		{"an env_file that is a directory linked out", "services:\n  app:\n    image: alpine\n    env_file: out/secret.env\n",
			map[string]string{".devcontainer/out": "->" + outside}, "symlink that leaves the workspace"},
		{"an extends file outside", "services:\n  app:\n    extends:\n      file: " + filepath.Join(outside, "base.yml") + "\n      service: base\n", nil,
			"is outside the workspace"},
		{"an extends file outside by ..", "services:\n  app:\n    extends:\n      file: ../../../../../../../../../../.." + filepath.Join(outside, "base.yml") + "\n      service: base\n", nil,
			"outside the workspace"},
		{"an extends file through a symlink out", "services:\n  app:\n    extends:\n      file: base.yml\n      service: base\n",
			map[string]string{".devcontainer/base.yml": "->" + filepath.Join(outside, "base.yml")}, "symlink that leaves the workspace"},
		{"an include outside", "include:\n  - " + filepath.Join(outside, "inc.yml") + "\nservices: {}\n", nil, "is outside the workspace"},
		{"an included project's .env linked out", "include:\n  - inc/app.yml\n",
			map[string]string{".devcontainer/inc/app.yml": "services:\n  app:\n    image: \"alpine:${S:-x}\"\n", ".devcontainer/inc/.env": "->" + filepath.Join(outside, "inc/.env")},
			"symlink that leaves the workspace"},
		{"an include with its own env_file", "include:\n  - path: inc/app.yml\n    env_file: " + filepath.Join(outside, "inc/.env") + "\n",
			map[string]string{".devcontainer/inc/app.yml": "services:\n  app:\n    image: alpine\n"}, `"include" with "env_file" is not supported`},
		{"an include with a project_directory", "include:\n  - path: inc/app.yml\n    project_directory: " + outside + "\n",
			map[string]string{".devcontainer/inc/app.yml": "services:\n  app:\n    image: alpine\n"}, `"include" with "project_directory" is not supported`},
		{"a build context outside", "services:\n  app:\n    build:\n      context: " + outside + "\n", nil,
			`"services.app.build.context": "` + outside + `" is outside the workspace`},
		{"a Dockerfile outside", "services:\n  app:\n    build:\n      context: .\n      dockerfile: " + filepath.Join(outside, "Dockerfile") + "\n", nil,
			`"services.app.build.dockerfile"`},
		{"the project's .env linked out", "services:\n  app:\n    image: \"alpine:${S:-x}\"\n",
			map[string]string{".devcontainer/.env": "->" + filepath.Join(outside, "secret.env")}, "symlink that leaves the workspace"},
		{"a compose file linked out", "", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "c2.yml", "service": "app"}`,
			".devcontainer/c2.yml": "->" + filepath.Join(outside, "inc.yml")}, "symlink that leaves the workspace"},
		{"a compose file outside", "", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "` + filepath.Join(outside, "inc.yml") + `", "service": "app"}`},
			"is outside the workspace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := composeWorkspace(t, tc.compose, tc.extra)
			eng := newFakeEngine()
			var progress strings.Builder
			// Not from the project's configuration: the user chose the
			// devcontainer, and its files still may not leave the workspace.
			res, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "devcontainer", Workspace: ws, Root: openRoot(t, ws), Progress: &progress}, &imageBuilds{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q (result %+v)", err, tc.want, res)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(progress.String(), secret) || slices.ContainsFunc(res.Env, func(e string) bool { return strings.Contains(e, secret) }) {
				t.Error("the secret was read")
			}
			if len(eng.builds) != 0 || len(eng.pulls) != 0 {
				t.Error("it built or pulled anyway")
			}
		})
	}
}

func TestComposeTakesNoVariableFromTheHost(t *testing.T) {
	// Not parallel: it sets a variable of the process's environment.
	t.Setenv("SHIRO_COMPOSE_PROBE", "from-the-host")
	if os.Getenv("HOME") == "" {
		t.Setenv("HOME", "/root")
	}
	tests := []struct {
		name, compose string
		wantRef       string
		wantEnv       []string
		wantErr       string
	}{
		{"an unset HOME is an error naming it", "services:\n  app:\n    image: alpine\n    environment:\n      H: ${HOME}/x\n", "", nil,
			"variable ${HOME} is not set"},
		{"so is any variable of the host", "services:\n  app:\n    image: \"alpine:${SHIRO_COMPOSE_PROBE}\"\n", "", nil,
			"variable ${SHIRO_COMPOSE_PROBE} is not set"},
		{"unbraced too", "services:\n  app:\n    image: alpine\n    environment:\n      P: $SHIRO_COMPOSE_PROBE\n", "", nil,
			"variable ${SHIRO_COMPOSE_PROBE} is not set"},
		{"a default is used instead of the host's value", "services:\n  app:\n    image: \"alpine:${SHIRO_COMPOSE_PROBE:-3.20}\"\n    environment:\n      H: ${HOME:-/home/dev}\n      E: ${EMPTY-}\n",
			"alpine:3.20", []string{"E=", "H=/home/dev"}, ""},
		{"a variable without a value is not taken from the host", "services:\n  app:\n    image: alpine\n    environment:\n      - SHIRO_COMPOSE_PROBE\n      - HOME\n",
			"alpine", nil, ""},
		{"a required variable says its own message", "services:\n  app:\n    image: \"alpine:${SHIRO_COMPOSE_PROBE:?set the tag}\"\n", "", nil, "set the tag"},
		{"an escaped dollar stays", "services:\n  app:\n    image: alpine\n    environment:\n      D: $$HOME\n", "alpine", []string{"D=$HOME"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := composeWorkspace(t, tc.compose, nil)
			eng := newFakeEngine("alpine", "alpine:3.20")
			res, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "devcontainer", Workspace: ws, Root: openRoot(t, ws)}, &imageBuilds{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(tc.wantErr, "${") {
					var uv *UnsetVariableError
					if !errors.As(err, &uv) {
						t.Errorf("error %v is not an *UnsetVariableError", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Ref != tc.wantRef || !slices.Equal(res.Env, tc.wantEnv) {
				t.Errorf("ref %q env %q, want %q %q", res.Ref, res.Env, tc.wantRef, tc.wantEnv)
			}
			for _, e := range res.Env {
				if strings.Contains(e, "from-the-host") || strings.Contains(e, os.Getenv("HOME")+"/") {
					t.Errorf("%q came from the host", e)
				}
			}
		})
	}
}

func TestComposeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, compose, want string }{
		{"no such service", "services:\n  web:\n    image: alpine\n", `no service "app" (they have "web")`},
		{"neither image nor build", "services:\n  app:\n    environment: {A: b}\n", `service "app" has neither an image nor a build context`},
		{"an inline Dockerfile", "services:\n  app:\n    build:\n      dockerfile_inline: FROM alpine\n", `"services.app.build.dockerfile_inline" is not supported`},
		{"a remote context", "services:\n  app:\n    build:\n      context: https://example.invalid/repo.git\n", "is not supported"},
		{"bad YAML", "services: [\n", "compose.yml"},
		{"a missing env_file", "services:\n  app:\n    image: alpine\n    env_file: nope.env\n", "nope.env"},
		{"an extends cycle", "services:\n  app:\n    extends: app\n    image: alpine\n", "ircular"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := composeWorkspace(t, tc.compose, nil)
			_, err := resolveImage(t.Context(), newFakeEngine("alpine"), ImageRequest{Spec: "devcontainer", Workspace: ws, Root: openRoot(t, ws)}, &imageBuilds{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("an optional env_file may be missing", func(t *testing.T) {
		t.Parallel()
		ws := composeWorkspace(t, "services:\n  app:\n    image: alpine\n    env_file:\n      - path: nope.env\n        required: false\n", nil)
		if _, err := resolveImage(t.Context(), newFakeEngine("alpine"), ImageRequest{Spec: "devcontainer", Workspace: ws, Root: openRoot(t, ws)}, &imageBuilds{}); err != nil {
			t.Error(err)
		}
	})
}
