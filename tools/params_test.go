package tools

import (
	"encoding/json"
	"slices"
	"testing"
)

// schemaShape is the part of a JSON schema the tests look at.
type schemaShape struct {
	Type       string                     `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
	Items      *schemaShape               `json:"items"`
	Minimum    *int                       `json:"minimum"`
	Maximum    *int                       `json:"maximum"`
	MaxItems   *int                       `json:"maxItems"`
	MinItems   *int                       `json:"minItems"`
	Default    json.RawMessage            `json:"default"`
}

func TestSchemas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool     Tool
		props    []string
		required []string
	}{
		{NewReadFile(), []string{"limit", "offset", "path"}, []string{"path"}},
		{NewReadManyFiles(), []string{"files"}, []string{"files"}},
		{NewWriteFile(), []string{"content", "path"}, []string{"path", "content"}},
		{NewEditFile(), []string{"newString", "oldString", "path", "replaceAll"}, []string{"path", "oldString", "newString"}},
		{NewMultiEdit(), []string{"edits", "path"}, []string{"path", "edits"}},
		{NewListDir(), []string{"depth", "includeIgnored", "path"}, []string{}},
		{NewGlob(), []string{"includeIgnored", "limit", "pattern"}, []string{"pattern"}},
	}
	for _, tt := range tests {
		t.Run(tt.tool.Name(), func(t *testing.T) {
			t.Parallel()
			var s schemaShape
			if err := json.Unmarshal(tt.tool.Schema(), &s); err != nil {
				t.Fatal(err)
			}
			var props []string
			for k := range s.Properties {
				props = append(props, k)
			}
			slices.Sort(props)
			if s.Type != "object" || !slices.Equal(props, tt.props) || !slices.Equal(s.Required, tt.required) {
				t.Errorf("schema %s", tt.tool.Schema())
			}
		})
	}
}

func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	prop := func(tool Tool, name string) schemaShape {
		var s schemaShape
		if err := json.Unmarshal(tool.Schema(), &s); err != nil {
			t.Fatal(err)
		}
		var p schemaShape
		if err := json.Unmarshal(s.Properties[name], &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := prop(NewReadManyFiles(), "files")
	depth := prop(NewListDir(), "depth")
	limit := prop(NewGlob(), "limit")
	path := prop(NewListDir(), "path")
	tests := []struct {
		name string
		ok   bool
	}{
		{"read_many_files takes 1 to 20 files", *files.MinItems == 1 && *files.MaxItems == 20},
		{"each file entry requires a path", files.Items != nil && slices.Equal(files.Items.Required, []string{"path"})},
		{"list_dir depth is 1..6, default 2", *depth.Minimum == 1 && *depth.Maximum == 6 && string(depth.Default) == "2"},
		{"glob limit defaults to 200", *limit.Minimum == 1 && string(limit.Default) == "200"},
		{"list_dir path defaults to .", string(path.Default) == `"."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !tt.ok {
				t.Fail()
			}
		})
	}
}
