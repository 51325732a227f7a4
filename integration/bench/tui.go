package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/shiroagent/shiro/orchestrator/tui"
)

// tuiBench measures the interactive UI's frame: Update for one key plus
// View, as Bubble Tea runs them, with a 10,000-line transcript; and the
// frame of a streaming reply (a delta plus the re-render of the live
// markdown).
func tuiBench(_ context.Context, r *report) error {
	dir, err := os.MkdirTemp("", "shiro-bench-tui-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, err := tui.NewBench(dir, 10_000, 120, 40)
	if err != nil {
		return err
	}
	defer b.Close()

	const keys = 2000
	typing := make([]time.Duration, 0, keys)
	sink := 0
	for i := range keys {
		start := time.Now()
		sink += b.Type(rune('a' + i%26))
		typing = append(typing, time.Since(start))
	}

	b.StartStreaming(40)
	const deltas = 300
	streaming := make([]time.Duration, 0, deltas)
	for i := range deltas {
		start := time.Now()
		sink += b.Stream(fmt.Sprintf("word%d ", i))
		streaming = append(streaming, time.Since(start))
	}
	if sink == 0 {
		return fmt.Errorf("the UI rendered nothing")
	}

	r.section("interactive UI (issue 5)")
	med := median(typing)
	r.add("frame while typing (Update+View), 10,000-line transcript, median", ms(med), "< 8 ms", med < 8*time.Millisecond)
	r.add("  same, 99th percentile", ms(percentile(typing, 99)), "", true)
	r.add("frame while streaming (delta + live markdown re-render), median", ms(median(streaming)), "", true)
	return nil
}

// percentile of durations (sorted copy), p in 0..100.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
