package integration

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/testenv"
)

// A project Dockerfile with a cache mount, a secret the user gives and a
// multi-stage COPY --from builds on the engine's BuildKit; its steps show
// as decoded lines, and the secret's value is in no line, no output and
// nothing of the image.
func TestDockerfileBuildsWithBuildKit(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	ws := projectWorkspace(t, api)
	secret := token(t, "build-secret")
	writeFiles(t, ws, map[string]string{
		"Dockerfile": "FROM " + base + " AS build\n" +
			// A step of its own per run, so BuildKit's cache of an earlier
			// run does not skip the steps after it.
			"RUN echo " + token(t, "run") + " > /run.txt\n" +
			"RUN --mount=type=cache,target=/cache echo from-the-cache > /cache/c && cp /cache/c /cached.txt\n" +
			"RUN --mount=type=secret,id=tok echo \"the secret is $(cat /run/secrets/tok)\" && sha256sum /run/secrets/tok | cut -c1-16 > /secret.sum\n" +
			"FROM " + base + "\n" +
			"COPY --from=build /cached.txt /secret.sum /opt/\n" +
			"RUN --mount=type=secret,id=tok test -s /run/secrets/tok\n",
	})
	env := []string{"SHIRO_TEST_BUILD_TOKEN=" + secret}
	res := shiro(t, ws, env, "--image", "./Dockerfile", "--build-secret", "id=tok,env=SHIRO_TEST_BUILD_TOKEN",
		"tool", "bash", bashJSON("cat /opt/cached.txt /opt/secret.sum", 0))
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "the result", res.stdout, "exit: 0", "from-the-cache")
	mustContain(t, "the progress", res.stderr, "building with BuildKit", "the secret is ****")
	for _, re := range []string{
		`(?m)^#\d+ \[build 3/4\] RUN --mount=type=cache,target=/cache `,
		`(?m)^#\d+ \[build 4/4\] RUN --mount=type=secret,id=tok `,
		`(?m)^#\d+ \[stage-1 2/3\] COPY --from=build /cached.txt /secret.sum /opt/$`,
		`(?m)^#\d+ DONE \d+\.\ds$`,
	} {
		if !regexp.MustCompile(re).MatchString(res.stderr) {
			t.Errorf("the progress lacks %s:\n%s", re, res.stderr)
		}
	}
	if strings.Contains(res.stdout+res.stderr, secret) {
		t.Errorf("the secret's value is shown:\n%s\n%s", res.stdout, res.stderr)
	}
	imgs := projectImages(t, api, ws)
	if len(imgs) != 1 {
		t.Fatalf("built images %+v, want one", imgs)
	}
	hist, err := api.ImageHistory(context.Background(), imgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	insp, err := api.ImageInspect(context.Background(), imgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	seen, _ := json.Marshal([]any{hist, insp})
	if strings.Contains(string(seen), secret) {
		t.Errorf("the secret's value is in the image's history or config")
	}
	if !strings.Contains(string(seen), "test -s /run/secrets/tok") {
		t.Errorf("the image's history lacks the secret step; the check above looked at the wrong thing")
	}

	// The same build again: every step cached.
	again := shiro(t, ws, env, "--image", "./Dockerfile", "--build-secret", "id=tok,env=SHIRO_TEST_BUILD_TOKEN",
		"tool", "bash", bashJSON("true", 0))
	if again.code != 0 || strings.Contains(again.stderr, "building") {
		t.Errorf("the second run built again (exit %d):\n%s", again.code, again.stderr)
	}
}

// A project's configuration cannot name a build secret: the key is
// ignored with a notice, the secret is absent from the build, and the
// failing step shows no host value.
func TestProjectCannotAskForABuildSecret(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	ws := projectWorkspace(t, api)
	secret := token(t, "host-secret")
	writeFiles(t, ws, map[string]string{
		"Dockerfile":         "FROM " + base + "\nRUN --mount=type=secret,id=tok,required=true cat /run/secrets/tok > /leak\n",
		".shiro/config.json": `{"sandbox": {"image": "./Dockerfile", "buildSecrets": ["id=tok,env=SHIRO_TEST_HOST_TOKEN"]}}`,
	})
	res := shiro(t, ws, []string{"SHIRO_TEST_HOST_TOKEN=" + secret}, "--trust-project", "tool", "bash", bashJSON("cat /leak", 0))
	if res.code == 0 {
		t.Fatalf("the build got the host's secret:\n%s\n%s", res.stdout, res.stderr)
	}
	mustContain(t, "stderr", res.stderr, `"sandbox.buildSecrets" is ignored: a project cannot ask for your secrets`, "building with BuildKit")
	if strings.Contains(res.stdout+res.stderr, secret) {
		t.Errorf("the host's secret is shown:\n%s\n%s", res.stdout, res.stderr)
	}
	if imgs := projectImages(t, api, ws); len(imgs) != 0 {
		t.Errorf("the failed build left images %+v", imgs)
	}
}

// A heredoc, which the engine's built-in frontend does not know, is a
// clear error before anything is sent to the engine.
func TestDockerfileHeredocIsAClearError(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	ws := projectWorkspace(t, api)
	writeFiles(t, ws, map[string]string{
		"Dockerfile": "FROM " + base + "\nRUN <<EOF\necho hi > /x\nEOF\n",
	})
	res := shiro(t, ws, nil, "--image", "./Dockerfile", "tool", "bash", bashJSON("cat /x", 0))
	if res.code == 0 {
		t.Fatalf("the heredoc built:\n%s\n%s", res.stdout, res.stderr)
	}
	if p, err := api.Ping(context.Background(), client.PingOptions{}); err == nil && p.APIVersion >= "1.42" {
		t.Fatalf("this engine (API %s) has a frontend that knows heredocs; the test is for Docker 20.10", p.APIVersion)
	}
	mustContain(t, "stderr", res.stderr, "uses heredocs (<<EOF), which the engine's built-in Dockerfile frontend (Docker 20.10) does not know")
	if strings.Contains(res.stderr, "unknown instruction") {
		t.Errorf("the engine's parse error is shown instead:\n%s", res.stderr)
	}
}
