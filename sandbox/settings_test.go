package sandbox

import (
	"slices"
	"testing"
)

func TestResolveEnv(t *testing.T) {
	t.Parallel()
	host := map[string]string{"TOKEN": "t0k", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	tests := []struct {
		name    string
		env     []string
		want    []string
		wantErr bool
	}{
		{"nothing", nil, []string{}, false},
		{"a bare name takes the host's value", []string{"TOKEN"}, []string{"TOKEN=t0k"}, false},
		{"an unset name is skipped", []string{"MISSING", "A=1"}, []string{"A=1"}, false},
		{"an empty host value is passed", []string{"EMPTY"}, []string{"EMPTY="}, false},
		{"NAME=value is passed as is", []string{"TOKEN=mine", "B=x=y"}, []string{"TOKEN=mine", "B=x=y"}, false},
		{"no name", []string{"=v"}, nil, true},
		{"a space in the name", []string{"A B=1"}, nil, true},
	}
	for _, tc := range tests {
		if err := (Settings{Env: tc.env}).CheckEnv(); (err != nil) != tc.wantErr {
			t.Errorf("%s: CheckEnv: %v", tc.name, err)
		}
		got, err := Settings{Env: tc.env}.ResolveEnv(lookup)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v", tc.name, err)
			continue
		}
		if !tc.wantErr && !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
