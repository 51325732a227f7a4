//go:build unix

package tools

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// BenchmarkGrep compares the grep tool with rg run directly (the spec's
// argv) through the same local sandbox, on a generated tree of
// SHIRO_BENCH_FILES files (default 20000): with its random .shiroignore
// files (rg run directly does not read them) and with none.
func BenchmarkGrep(b *testing.B) {
	requireRg(b)
	for _, shiroignore := range []bool{false, true} {
		dir := b.TempDir()
		if err := generateGrepTree(dir, benchFiles(b), 1); err != nil {
			b.Fatal(err)
		}
		if !shiroignore {
			removeShiroignores(b, dir)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { root.Close() })
		sb := localSandbox(b, dir)
		env := &Env{Workspace: dir, Root: root, Sandbox: sb}
		for _, pattern := range []string{"zqxj", "func"} {
			name := fmt.Sprintf("shiroignore=%v/pattern=%s", shiroignore, pattern)
			b.Run(name+"/tool", func(b *testing.B) {
				tool := NewGrep()
				input, err := json.Marshal(map[string]any{"pattern": pattern})
				if err != nil {
					b.Fatal(err)
				}
				cpu := cpuTime()
				for b.Loop() {
					res, err := tool.Run(b.Context(), env, input)
					if err != nil || res.IsError {
						b.Fatalf("grep: %v %s", err, res.Text)
					}
				}
				reportCPU(b, cpu)
			})
			// rg as the spec runs it.
			args := []string{"rg", "--line-number", "--no-heading", "--color", "never", "--no-require-git",
				"--max-count", "200", "--regexp", pattern, "."}
			b.Run(name+"/rg", func(b *testing.B) {
				cpu := cpuTime()
				for b.Loop() {
					res, err := sb.Run(b.Context(), sandbox.Command{Args: args, Dir: dir, Stdout: io.Discard, Stderr: io.Discard})
					if err != nil || res.ExitCode > 1 {
						b.Fatalf("rg: %v, exit %d", err, res.ExitCode)
					}
				}
				reportCPU(b, cpu)
			})
		}
	}
}

// cpuTime is the CPU time used so far by this process and its finished
// children (rg runs as a child of the local sandbox's runner): on a busy
// machine a steadier measure than wall time.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return 0
	}
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
}
