package docker

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestResolveRefusesHostileFiles plants, in a workspace whose project
// config chose a devcontainer.json or a Dockerfile, the links and FIFOs a
// repository (or the sandbox, between two sessions) can make: none is read
// on the host, none stalls the resolution, and the error names the file
// and why. Links that stay inside are followed.
func TestResolveRefusesHostileFiles(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-MARKER-d41c"
	tests := []struct {
		name  string
		files map[string]string // "->target" is a symlink ("@" the outside directory), "fifo" a FIFO
		spec  string
		// wantErr is in the error; "" means it resolves and builds.
		wantErr string
	}{
		{
			name:    "devcontainer.json to a file outside",
			files:   map[string]string{".devcontainer/devcontainer.json": "->@/dc.json"},
			spec:    "devcontainer",
			wantErr: ".devcontainer/devcontainer.json is a symlink that leaves the workspace; not read",
		},
		{
			name:    "devcontainer.json to /proc/self/environ",
			files:   map[string]string{".devcontainer.json": "->/proc/self/environ"},
			spec:    "devcontainer",
			wantErr: ".devcontainer.json is a symlink that leaves the workspace; not read",
		},
		{
			name:    "devcontainer.json through a chain that ends outside",
			files:   map[string]string{".devcontainer/devcontainer.json": "->../hop.json", "hop.json": "->@/dc.json"},
			spec:    "devcontainer",
			wantErr: ".devcontainer/devcontainer.json is a symlink that leaves the workspace; not read",
		},
		{
			name:    "the .devcontainer directory linked outside",
			files:   map[string]string{".devcontainer": "->@"},
			spec:    "devcontainer",
			wantErr: ".devcontainer/devcontainer.json is behind a symlink that leaves the workspace; not read",
		},
		{
			name:    "devcontainer.json is a FIFO",
			files:   map[string]string{".devcontainer/devcontainer.json": "fifo"},
			spec:    "devcontainer",
			wantErr: ".devcontainer/devcontainer.json is a FIFO; not read",
		},
		{
			name:    "the Dockerfile a devcontainer.json names is a FIFO",
			files:   map[string]string{".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "../ctx"}}`, ".devcontainer/Dockerfile": "fifo", "ctx/": ""},
			spec:    "devcontainer",
			wantErr: "Dockerfile is a FIFO; not read",
		},
		{
			name:    "the context a devcontainer.json names is a FIFO",
			files:   map[string]string{".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "../ctx"}}`, ".devcontainer/Dockerfile": "FROM x\n", "ctx": "fifo"},
			spec:    "devcontainer",
			wantErr: "ctx is a FIFO, not a directory; not read",
		},
		{
			name:    "the context a devcontainer.json names is linked outside",
			files:   map[string]string{".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "../ctx"}}`, ".devcontainer/Dockerfile": "FROM x\n", "ctx": "->@"},
			spec:    "devcontainer",
			wantErr: "ctx is a symlink that leaves the workspace; not read",
		},
		{
			name:    "a Dockerfile that is a FIFO",
			files:   map[string]string{"Dockerfile": "fifo"},
			spec:    "Dockerfile",
			wantErr: "Dockerfile is a FIFO; not read",
		},
		{
			name:    "a Dockerfile linked to /proc/self/environ",
			files:   map[string]string{"Dockerfile": "->/proc/self/environ"},
			spec:    "Dockerfile",
			wantErr: "Dockerfile is a symlink that leaves the workspace; not read",
		},
		{
			name:    "a .dockerignore that is a FIFO",
			files:   map[string]string{"Dockerfile": "FROM x\n", ".dockerignore": "fifo"},
			spec:    "Dockerfile",
			wantErr: "read .dockerignore: .dockerignore: not a regular file (a FIFO)",
		},
		{
			name:  "FIFOs and links out in the context are never sent",
			files: map[string]string{"Dockerfile": "FROM x\n", "pipe": "fifo", "out": "->@/id_rsa", "env": "->/proc/self/environ"},
			spec:  "Dockerfile",
		},
		{
			name:  "a devcontainer.json linked inside is followed",
			files: map[string]string{".devcontainer/devcontainer.json": "->../tools/dc.json", "tools/dc.json": `{"build": {"dockerfile": "Dockerfile"}}`, ".devcontainer/Dockerfile": "FROM x\n"},
			spec:  "devcontainer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			outside := t.TempDir()
			writeTree(t, outside, map[string]string{
				"id_rsa":     secret,
				"dc.json":    `{"build": {"dockerfile": "Dockerfile"}, "containerEnv": {"K": "` + secret + `"}}`,
				"Dockerfile": "FROM x\nRUN echo " + secret + "\n",
			})
			ws := t.TempDir()
			for name, v := range tt.files {
				p := filepath.Join(ws, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				switch {
				case strings.HasSuffix(name, "/"):
					err = os.MkdirAll(p, 0o755)
				case v == "fifo":
					err = syscall.Mkfifo(p, 0o644)
				case strings.HasPrefix(v, "->"):
					err = os.Symlink(strings.Replace(strings.TrimPrefix(v, "->"), "@", outside, 1), p)
				default:
					err = os.WriteFile(p, []byte(v), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			eng := newFakeEngine()
			res, err := resolveImage(t.Context(), eng, ImageRequest{Spec: tt.spec, Workspace: ws, Root: openRoot(t, ws), FromProject: true}, &imageBuilds{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				if len(eng.builds) != 0 {
					t.Error("it built anyway")
				}
			} else if err != nil || len(eng.builds) != 1 {
				t.Fatalf("%d builds, %v", len(eng.builds), err)
			}
			for _, kv := range res.Env {
				if strings.Contains(kv, secret) {
					t.Errorf("the environment holds %q", kv)
				}
			}
			for _, c := range eng.contexts {
				for name, content := range c {
					if strings.Contains(content, secret) || strings.Contains(content, "PATH=") {
						t.Errorf("%s sent with %q", name, content)
					}
					if name == "pipe" {
						t.Error("a FIFO was sent")
					}
				}
			}
		})
	}
}
