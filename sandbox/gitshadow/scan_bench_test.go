package gitshadow

import (
	"testing"

	"github.com/shiroagent/shiro/internal/treegen"
)

// BenchmarkScanUnchanged is the scanner's cost after a command that changed
// nothing, on the 100,000-file generated tree, with kernel events and with
// the change-time walk alone.
func BenchmarkScanUnchanged(b *testing.B) {
	ws := b.TempDir()
	if err := treegen.Generate(ws, 100_000, 1); err != nil {
		b.Fatal(err)
	}
	b.Run("events", func(b *testing.B) { benchScan(b, scanner(b, ws)) })
	b.Run("walk", func(b *testing.B) {
		s := scanner(b, ws)
		s.Close()
		benchScan(b, s)
	})
}

func benchScan(b *testing.B, s *Scanner) {
	if _, err := s.Scan(); err != nil {
		b.Fatal(err)
	}
	for _, st := range s.cache {
		st.racy = false
	}
	b.ReportMetric(float64(len(s.cache)), "dirs")
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Scan(); err != nil {
			b.Fatal(err)
		}
	}
}
