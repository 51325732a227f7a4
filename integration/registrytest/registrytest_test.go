package registrytest_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/registrytest"
	"github.com/shiroagent/shiro/integration/testenv"
)

func TestRegistry(t *testing.T) {
	api := testenv.RequireDocker(t)
	img := testenv.RequireImage(t, api)
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plain HTTP on 127.0.0.1", false}, {"TLS on [::1] with the test's CA", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := registrytest.Start(t, registrytest.Options{User: "alice", Password: "s3cret-pw", TLS: tc.tls})
			ref := registrytest.Push(t, api, r, img, "team/dev:1")
			if _, err := api.ImageInspect(context.Background(), ref); err == nil {
				t.Fatalf("%s is still local after Push", ref)
			}
			if err := pull(t, api, ref, ""); err == nil || !strings.Contains(err.Error(), "no basic auth credentials") {
				t.Fatalf("pull without credentials: %v, want no basic auth credentials", err)
			}
			if err := pull(t, api, ref, auth("alice", "wrong")); err == nil {
				t.Fatal("pull with a wrong password worked")
			}
			if err := pull(t, api, ref, auth("alice", "s3cret-pw")); err != nil {
				t.Fatalf("pull with the account: %v", err)
			}
			registrytest.RemoveLocal(t, api, ref)
		})
	}
}

func pull(t *testing.T, api *client.Client, ref, auth string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := api.ImagePull(ctx, ref, client.ImagePullOptions{RegistryAuth: auth})
	if err != nil {
		return err
	}
	defer res.Close()
	return res.Wait(ctx)
}

func auth(user, password string) string {
	b, _ := json.Marshal(registry.AuthConfig{Username: user, Password: password})
	return base64.URLEncoding.EncodeToString(b)
}
