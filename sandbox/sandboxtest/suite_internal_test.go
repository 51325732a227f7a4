package sandboxtest

import (
	"fmt"
	"testing"
)

// TestEscapesFindsTheLoopNotItsForks: while a loop forks its sleep, the
// child shows the loop's command line; the loop found is the parent of
// such a child, whatever order /proc lists them in.
func TestEscapesFindsTheLoopNotItsForks(t *testing.T) {
	t.Parallel()
	r := NewEscapes(t.TempDir())
	cmdline := func(i int) string {
		return fmt.Sprintf("sh -c while sleep 0.2%s; do date >> '%s'; done", r.Token, r.Files[i])
	}
	loop := Proc{Pid: 563, Ppid: 1, Pgid: 563, Sid: 563, Cmdline: cmdline(2)}
	fork := Proc{Pid: 595, Ppid: 563, Pgid: 563, Sid: 563, Cmdline: cmdline(2)}
	for _, procs := range [][]Proc{{loop, fork}, {fork, loop}} {
		if got := r.loops(procs)[2]; got.Pid != loop.Pid {
			t.Errorf("from %v: found %v, want the loop %v", procs, got, loop)
		}
	}
}
