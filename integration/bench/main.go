// Command bench measures shiro against baselines taken in the same run and
// prints the figures the issues set targets for. `make bench` runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	ctx := context.Background()
	if p := os.Getenv("SHIRO_BENCH_CPUPROFILE"); p != "" {
		// Where the host's time goes (go tool pprof): the sections run here.
		f, err := os.Create(p)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: cpu profile: %v\n", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	r := &report{}
	only := os.Getenv("BENCH_ONLY") // one section by name, e.g. BENCH_ONLY=network
	for _, b := range []struct {
		name string
		run  func(context.Context, *report) error
	}{
		{"sandbox", sandboxBench},
		{"git", gitBench},
		{"tools", toolsBench},
		{"tui", tuiBench},
		{"loop", loopBench},
		{"mcp", mcpBench},
		{"shape", shapeBench},
		{"network", networkBench},
		{"undo", undoBench},
		{"copy", copyBench},
		{"kube", kubeBench},
		{"ports", portsBench},
		{"jobs", jobsBench},
		{"worktree", worktreeBench},
		{"parallel", parallelBench},
		{"guard", guardBench},
	} {
		// `go run ./integration/bench shape network` (or BENCH_ONLY=shape,
		// SHIRO_BENCH=undo,git) runs only the sections named.
		names := append(os.Args[1:], strings.Fields(only)...)
		names = append(names, strings.FieldsFunc(os.Getenv("SHIRO_BENCH"), func(r rune) bool { return r == ',' })...)
		if len(names) > 0 && !slices.Contains(names, b.name) {
			continue
		}
		if err := b.run(ctx, r); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", b.name, err)
			os.Exit(1)
		}
	}
	r.print()
	if r.failed {
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// report collects lines of figures, each with an optional target.
type report struct {
	rows   [][4]string
	failed bool
}

// add records a figure; ok=false marks a missed target.
func (r *report) add(name, value, target string, ok bool) {
	mark := ""
	if target != "" {
		mark = "ok"
		if !ok {
			mark = "MISSED"
			r.failed = true
		}
	}
	r.rows = append(r.rows, [4]string{name, value, target, mark})
}

func (r *report) section(title string) {
	r.rows = append(r.rows, [4]string{"", "", "", ""}, [4]string{"## " + title, "", "", ""})
}

func (r *report) print() {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, row := range r.rows {
		fmt.Fprintln(tw, strings.Join(row[:], "\t"))
	}
	tw.Flush()
}

// median of durations (sorted copy).
func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
