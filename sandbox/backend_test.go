package sandbox

import (
	"slices"
	"strings"
	"testing"
)

type namedBackend struct {
	Backend // nil: only Name is called
	name    string
}

func (b namedBackend) Name() string { return b.name }

func TestRegistryFindsBackendsByName(t *testing.T) {
	Register(namedBackend{name: "zz-test-b"})
	Register(namedBackend{name: "aa-test-a"})
	Register(namedBackend{name: DefaultBackend})
	if got := Backends(); got[0] != DefaultBackend || !slices.IsSorted(got[1:]) || !slices.Contains(got, "zz-test-b") {
		t.Errorf("Backends() = %v: want the default first, then sorted", got)
	}
	b, err := Lookup("")
	if err != nil || b.Name() != DefaultBackend {
		t.Errorf(`Lookup("") = %v, %v`, b, err)
	}
	if b, err := Lookup("aa-test-a"); err != nil || b.Name() != "aa-test-a" {
		t.Errorf("Lookup = %v, %v", b, err)
	}
	_, err = Lookup("nowhere")
	if err == nil || !strings.Contains(err.Error(), `"nowhere"`) || !strings.Contains(err.Error(), "aa-test-a") {
		t.Errorf("an unknown name: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second registration of a name did not panic")
		}
	}()
	Register(namedBackend{name: "aa-test-a"})
}
