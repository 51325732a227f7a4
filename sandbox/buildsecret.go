package sandbox

import (
	"fmt"
	"strings"
)

// BuildSecret is a secret the user gives a Dockerfile build, for its
// `RUN --mount=type=secret,id=ID` steps: the value of the host's
// environment variable Env, or the content of the host file File. Only
// the user chooses them (a flag or the user config); a secret id the user
// did not give is absent from the build.
type BuildSecret struct {
	ID   string
	Env  string
	File string
}

// ParseBuildSecret reads one --build-secret entry, as docker build's
// --secret writes it: "id=NAME,env=VAR" or "id=NAME,src=FILE" (source=
// for src=). "id=NAME" alone means env=NAME.
func ParseBuildSecret(s string) (BuildSecret, error) {
	var b BuildSecret
	for field := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok || v == "" {
			return BuildSecret{}, fmt.Errorf("build secret %q: %q is not key=value", s, field)
		}
		switch strings.ToLower(k) {
		case "id":
			b.ID = v
		case "env":
			b.Env = v
		case "src", "source":
			b.File = v
		case "type":
			if v != "env" && v != "file" {
				return BuildSecret{}, fmt.Errorf("build secret %q: type is env or file", s)
			}
		default:
			return BuildSecret{}, fmt.Errorf("build secret %q: unknown key %q (id, env, src)", s, k)
		}
	}
	switch {
	case b.ID == "":
		return BuildSecret{}, fmt.Errorf("build secret %q: no id=", s)
	case b.Env != "" && b.File != "":
		return BuildSecret{}, fmt.Errorf("build secret %q: env= or src=, not both", s)
	case b.Env == "" && b.File == "":
		b.Env = b.ID
	}
	return b, nil
}

// ParseBuildSecrets reads every entry; an id given twice is an error.
func ParseBuildSecrets(list []string) ([]BuildSecret, error) {
	var out []BuildSecret
	seen := map[string]bool{}
	for _, s := range list {
		b, err := ParseBuildSecret(s)
		if err != nil {
			return nil, err
		}
		if seen[b.ID] {
			return nil, fmt.Errorf("build secret %s given twice", b.ID)
		}
		seen[b.ID] = true
		out = append(out, b)
	}
	return out, nil
}
