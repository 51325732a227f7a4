package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/testenv"
)

// Compose devcontainers: shiro plans (the trust question names what would
// run or be built) and starts the named service's image or build, with its
// environment, and reads nothing of the host on the files' behalf.

// composeProject writes a Compose devcontainer (compose.yml beside it) and
// a project config that names it as the sandbox's image.
func composeProject(t *testing.T, ws, compose string, extra map[string]string) {
	t.Helper()
	files := map[string]string{
		".shiro/config.json":              `{"sandbox": {"image": "devcontainer"}}`,
		".devcontainer/devcontainer.json": `{"name": "compose test", "dockerComposeFile": ["compose.yml"], "service": "app", "workspaceFolder": "/workspaces/app", "runServices": ["app", "db"]}`,
		".devcontainer/compose.yml":       compose,
	}
	for k, v := range extra {
		files[k] = v
	}
	writeFiles(t, ws, files)
}

// checkConfined fails when the sandbox container got what the Compose file
// asked beyond the service's image and environment.
func checkConfined(t *testing.T, api *client.Client, ws string) {
	t.Helper()
	in, err := api.ContainerInspect(t.Context(), onlyContainer(t, api, ws), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := in.Container.HostConfig
	if hc.Privileged || len(hc.CapAdd) > 0 || hc.NetworkMode == "host" || len(hc.PortBindings) > 0 {
		t.Errorf("privileged %v, capAdd %v, network %q, ports %v", hc.Privileged, hc.CapAdd, hc.NetworkMode, hc.PortBindings)
	}
	for _, m := range in.Container.Mounts {
		if m.Source == "/var/run/docker.sock" || m.Destination == "/workspaces/app" {
			t.Errorf("the Compose file's mount was made: %+v", m)
		}
	}
}

func TestComposeDevcontainerImageForm(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	ws := projectWorkspace(t, api)
	marker := token(t, "env")
	composeProject(t, ws, `
services:
  app:
    image: `+base+`
    environment:
      TEAM_VAR: "${TEAM:-unset}"
      LITERAL: `+marker+`
    env_file: [app.env]
    ports: ["8080:8080"]
    volumes: ["..:/workspaces/app", "/var/run/docker.sock:/var/run/docker.sock"]
    privileged: true
    network_mode: host
    command: sleep infinity
  db:
    image: postgres:16
`, map[string]string{
		".devcontainer/.env":    "TEAM=from-dotenv\n",
		".devcontainer/app.env": "FROM_FILE=from-env-file\n",
	})

	// Planned: untrusted, the question names the service's image (and the
	// run goes on in the default sandbox).
	res := shiro(t, ws, nil, "tool", "bash", bashJSON(`echo "team=$TEAM_VAR"`, 0))
	mustContain(t, "the untrusted run", res.stderr, "[notice] trust: skipped image: run the image "+base+" named by ./.devcontainer/devcontainer.json (pulled if missing)")
	if strings.Contains(res.stdout, "team=from-dotenv") {
		t.Errorf("untrusted, the service's environment was used:\n%s", res.stdout)
	}
	testenv.RemoveContainers(t, api, ws)

	// Started: the service's image and environment, nothing else.
	res = shiro(t, ws, nil, "--trust-project", "tool", "bash",
		bashJSON(`echo "team=$TEAM_VAR"; echo "literal=$LITERAL"; echo "file=$FROM_FILE"; grep CapEff /proc/self/status`, 0))
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "the result", res.stdout, "team=from-dotenv", "literal="+marker, "file=from-env-file", "CapEff:\t0000000000000000")
	mustContain(t, "the notices", res.stderr,
		`.devcontainer/compose.yml: "services.app.ports" is ignored`,
		`"services.app.privileged" is ignored`, `"services.app.network_mode" is ignored`, `"services.app.volumes" is ignored`,
		`services "db" are not started`, "running the other services of a Compose file is not supported",
		`"runServices" is ignored`)
	checkConfined(t, api, ws)
}

func TestComposeDevcontainerBuildForm(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := projectWorkspace(t, api)
	marker := token(t, "arg")
	composeProject(t, ws, `
services:
  app:
    extends:
      file: base.yml
      service: common
    build:
      context: ..
      dockerfile: .devcontainer/Dockerfile
      target: dev
      args:
        MARKER: `+marker+`
`, map[string]string{
		".devcontainer/base.yml": "services:\n  common:\n    environment:\n      FROM_BASE: extended\n",
		// The stable way to extend shiro's image, whatever its tag.
		".devcontainer/Dockerfile": "ARG SHIRO_BASE_IMAGE\nFROM ${SHIRO_BASE_IMAGE} AS dev\nARG MARKER\nRUN echo \"$MARKER\" > /opt/marker\n" +
			"FROM dev AS other\nRUN false\n",
	})

	res := shiro(t, ws, nil, "tool", "bash", bashJSON("true", 0))
	mustContain(t, "the untrusted run", res.stderr,
		"[notice] trust: skipped image: build ./.devcontainer/Dockerfile (from ./.devcontainer/devcontainer.json) FROM ${SHIRO_BASE_IMAGE} (network none")
	if imgs := projectImages(t, api, ws); len(imgs) != 0 {
		t.Fatalf("untrusted, it built %+v", imgs)
	}
	testenv.RemoveContainers(t, api, ws)

	res = shiro(t, ws, nil, "--trust-project", "tool", "bash", bashJSON(`cat /opt/marker; echo "base=$FROM_BASE"`, 0))
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "the result", res.stdout, marker, "base=extended")
	mustContain(t, "stderr", res.stderr, "building shiro-project:")
	if imgs := projectImages(t, api, ws); len(imgs) != 1 || imgs[0].Source != filepath.Join(ws, ".devcontainer", "devcontainer.json") {
		t.Errorf("built images %+v, want one from the devcontainer.json", imgs)
	}
	checkConfined(t, api, ws)
}

func TestComposeDevcontainerReadsNothingOutside(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	outside := t.TempDir()
	secret := token(t, "secret")
	writeFiles(t, outside, map[string]string{
		"secret.env": "LEAK=" + secret + "\n",
		"base.yml":   "services:\n  common:\n    environment:\n      LEAK: " + secret + "\n",
	})
	for _, c := range []struct {
		name, compose string
		link          bool // .devcontainer/link.* leads to outside
		want          string
	}{
		{"an env_file by its path", "    env_file: " + filepath.Join(outside, "secret.env") + "\n", false, "is outside the workspace"},
		{"an env_file through a symlink", "    env_file: link.env\n", true, "is a symlink that leaves the workspace"},
		{"an extends file by its path", "    extends:\n      file: " + filepath.Join(outside, "base.yml") + "\n      service: common\n", false, "is outside the workspace"},
		{"an extends file climbing out", "    extends:\n      file: ../../../../../../../../../../.." + filepath.Join(outside, "base.yml") + "\n      service: common\n", false, "outside the workspace"},
		{"an extends file through a symlink", "    extends:\n      file: link.yml\n      service: common\n", true, "is a symlink that leaves the workspace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := testenv.Workspace(t, api)
			composeProject(t, ws, "services:\n  app:\n    image: "+base+"\n"+c.compose, nil)
			if c.link {
				for _, l := range [][2]string{{"link.env", "secret.env"}, {"link.yml", "base.yml"}} {
					if err := os.Symlink(filepath.Join(outside, l[1]), filepath.Join(ws, ".devcontainer", l[0])); err != nil {
						t.Fatal(err)
					}
				}
			}
			res := shiro(t, ws, nil, "--trust-project", "tool", "bash", bashJSON("env", 0))
			if res.code != 1 {
				t.Errorf("exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
			}
			mustContain(t, "stderr", res.stderr, c.want)
			if strings.Contains(res.stdout+res.stderr, secret) {
				t.Error("the file outside the workspace was read")
			}
			if ids := testenv.ContainerIDs(t, api, ws); len(ids) != 0 {
				t.Errorf("a container started: %v", ids)
			}
		})
	}
}

func TestComposeDevcontainerTakesNothingFromTheHostEnvironment(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	hostValue := token(t, "host")
	home := filepath.Join(t.TempDir(), hostValue)
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "SHIRO_TEST_HOST_VAR=" + hostValue}

	t.Run("an unset variable is an error naming it", func(t *testing.T) {
		t.Parallel()
		ws := testenv.Workspace(t, api)
		composeProject(t, ws, "services:\n  app:\n    image: "+base+"\n    environment:\n      H: ${HOME}/cache\n", nil)
		res := shiro(t, ws, env, "--trust-project", "tool", "bash", bashJSON("env", 0))
		if res.code != 1 {
			t.Errorf("exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
		}
		mustContain(t, "stderr", res.stderr, "variable ${HOME} is not set", "never from your environment")
		if strings.Contains(res.stdout+res.stderr, hostValue) {
			t.Error("the host's HOME was used")
		}
	})
	t.Run("a default is used, never the host's value", func(t *testing.T) {
		t.Parallel()
		ws := testenv.Workspace(t, api)
		composeProject(t, ws, "services:\n  app:\n    image: "+base+"\n    environment:\n      H: ${HOME:-/home/dev}\n      V: ${SHIRO_TEST_HOST_VAR-fallback}\n", nil)
		res := shiro(t, ws, env, "--trust-project", "tool", "bash", bashJSON(`echo "h=$H v=$V"`, 0))
		if res.code != 0 {
			t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
		}
		mustContain(t, "the result", res.stdout, "h=/home/dev v=fallback")
		if strings.Contains(res.stdout, hostValue) {
			t.Error("a host variable reached the sandbox")
		}
	})
}

func TestDevcontainerWithAByteOrderMark(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	writeFiles(t, ws, map[string]string{
		".devcontainer/devcontainer.json": "\uFEFF{\n  // saved by an editor that writes a BOM\n  \"image\": \"" + base + "\",\n  \"containerEnv\": {\"BOM_OK\": \"yes\"},\n}\n",
	})
	res := shiro(t, ws, nil, "--image", "devcontainer", "tool", "bash", bashJSON(`echo "bom=$BOM_OK"`, 0))
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "the result", res.stdout, "bom=yes")
}

func TestDevcontainerTemplatePlaceholderRefused(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	for _, c := range []struct{ name, file, want string }{
		{"in the image", `{"image": "mcr.microsoft.com/devcontainers/python:1-${templateOption:imageVariant}"}`,
			`"image": ${templateOption:imageVariant} is a template placeholder`},
		{"an unknown variable in a build arg", `{"build": {"dockerfile": "Dockerfile", "args": {"VARIANT": "${variant}"}}}`,
			`"build.args.VARIANT": unknown variable ${variant}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := projectWorkspace(t, api)
			writeFiles(t, ws, map[string]string{".devcontainer/devcontainer.json": c.file, ".devcontainer/Dockerfile": "FROM scratch\n"})
			res := shiro(t, ws, nil, "--image", "devcontainer", "tool", "bash", bashJSON("true", 0))
			if res.code != 1 {
				t.Errorf("exit %d, want 1\n%s", res.code, res.stderr)
			}
			mustContain(t, "stderr", res.stderr, c.want)
			if imgs := projectImages(t, api, ws); len(imgs) != 0 {
				t.Errorf("built %+v", imgs)
			}
		})
	}
}
