package orchestrator

import (
	"slices"
	"testing"
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
