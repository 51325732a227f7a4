package docker

import (
	"slices"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
)

func TestMergeEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		lists [][]string
		want  []string
	}{
		{"nothing", nil, nil},
		{"the user's entries win, in the image's place", [][]string{{"A=image", "B=image"}, {"B=user", "C=user"}}, []string{"A=image", "B=user", "C=user"}},
		{"an empty value still replaces", [][]string{{"PATH=/x"}, {"PATH="}}, []string{"PATH="}},
		{"values holding = are kept whole", [][]string{{"OPTS=a=b"}}, []string{"OPTS=a=b"}},
	}
	for _, tc := range tests {
		if got := mergeEnv(tc.lists...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestOpenRunsTheResolvedImageWithTheUsersEnvOnTop(t *testing.T) {
	t.Parallel()
	lookups := 0
	o := Options{Spec: sandbox.Spec{Settings: sandbox.Settings{Image: "./Dockerfile", Env: []string{"TOKEN", "PATH=/user", "UNSET"}}, LookupEnv: func(k string) (string, bool) {
		lookups++
		if k == "TOKEN" {
			return "t0k", true
		}
		return "", false
	}}}
	got, err := o.resolve(ResolvedImage{Ref: "shiro-build-1", Kind: KindDockerfile, Env: []string{"PATH=/image", "A=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Image != "shiro-build-1" {
		t.Errorf("image %q, want the resolved reference", got.Image)
	}
	if want := []string{"PATH=/user", "A=1", "TOKEN=t0k"}; !slices.Equal(got.Env, want) {
		t.Errorf("env %q, want %q", got.Env, want)
	}
	if lookups != 2 {
		t.Errorf("%d lookups, want one per bare name", lookups)
	}
	if o.Image != "./Dockerfile" || len(o.Env) != 3 {
		t.Error("resolve changed the caller's options")
	}
	if _, err := (Options{Spec: sandbox.Spec{Settings: sandbox.Settings{Env: []string{"=x"}}}}).resolve(ResolvedImage{Ref: "r"}); err == nil {
		t.Error("a bad entry was accepted")
	}
}
