package jobs

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestRing(t *testing.T) {
	t.Parallel()
	t.Run("small writes are read back whole, from any offset", func(t *testing.T) {
		t.Parallel()
		r := NewRing(16)
		r.Write([]byte("hello "))
		r.Write([]byte("world"))
		if c := r.Since(0); string(c.Data) != "hello world" || c.Next != 11 || c.Dropped != 0 {
			t.Fatalf("Since(0) = %+v", c)
		}
		if c := r.Since(6); string(c.Data) != "world" || c.From != 6 {
			t.Fatalf("Since(6) = %q from %d", c.Data, c.From)
		}
		if c := r.Since(99); len(c.Data) != 0 || c.Next != 11 {
			t.Fatalf("Since past the end = %+v", c)
		}
	})
	t.Run("the oldest part is dropped and the read says how much", func(t *testing.T) {
		t.Parallel()
		r := NewRing(10)
		for i := range 5 {
			fmt.Fprintf(r, "%d%d%d%d", i, i, i, i) // 20 bytes in all
		}
		c := r.Since(0)
		if string(c.Data) != "2233334444" || c.From != 10 || c.Dropped != 10 || c.Next != 20 {
			t.Fatalf("Since(0) = %q from %d dropped %d next %d", c.Data, c.From, c.Dropped, c.Next)
		}
		if !strings.Contains(c.Marker(), "10 bytes of earlier output dropped") {
			t.Fatalf("marker %q", c.Marker())
		}
		if c := r.Since(15); string(c.Data) != "34444" || c.Dropped != 0 {
			t.Fatalf("Since(15) = %q dropped %d", c.Data, c.Dropped)
		}
	})
	t.Run("one write larger than the ring keeps its tail", func(t *testing.T) {
		t.Parallel()
		r := NewRing(8)
		r.Write([]byte("abc"))
		r.Write([]byte("0123456789ABCDEF"))
		r.Write([]byte("xy"))
		if c := r.Since(0); string(c.Data) != "ABCDEFxy" || c.Dropped != 13 || c.Next != 21 {
			t.Fatalf("Since(0) = %q dropped %d next %d", c.Data, c.Dropped, c.Next)
		}
	})
	t.Run("tail returns the last lines", func(t *testing.T) {
		t.Parallel()
		r := NewRing(64)
		r.Write([]byte("one\ntwo\nthree\nfour\n"))
		if c := r.Tail(2); string(c.Data) != "three\nfour\n" || c.From != 8 {
			t.Fatalf("Tail(2) = %q from %d", c.Data, c.From)
		}
		if c := r.Tail(10); string(c.Data) != "one\ntwo\nthree\nfour\n" || c.Dropped != 0 {
			t.Fatalf("Tail(10) = %q", c.Data)
		}
	})
}

// 10 MiB through a 1 MiB ring: exactly the newest 1 MiB is kept, in
// order, offsets count every byte, and the memory held stays bounded.
func TestRingTenMiB(t *testing.T) {
	r := NewRing(RingSize)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	line := func(i int) []byte { return fmt.Appendf(nil, "line %08d %s\n", i, strings.Repeat("x", 50)) }
	var total int64
	var all bytes.Buffer // the last 2 MiB written, to compare with
	for i := 0; total < 10<<20; i++ {
		l := line(i)
		r.Write(l)
		total += int64(len(l))
		all.Write(l)
		if all.Len() > 2<<20 {
			all.Next(all.Len() - (2 << 20))
		}
	}
	c := r.Since(0)
	if c.Next != total || int64(len(c.Data)) != RingSize || c.Dropped != total-RingSize {
		t.Fatalf("next %d (want %d), %d bytes kept, dropped %d", c.Next, total, len(c.Data), c.Dropped)
	}
	want := all.Bytes()[all.Len()-RingSize:]
	if !bytes.Equal(c.Data, want) {
		t.Fatal("the ring does not hold the newest 1 MiB in order")
	}
	if c.Marker() == "" {
		t.Fatal("no marker for the dropped output")
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The ring (1 MiB), the copy just read (1 MiB) and the comparison
	// buffer (2 MiB+) are live; 10 MiB of output must not be.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 6<<20 {
		t.Fatalf("heap grew by %d bytes for 10 MiB through a 1 MiB ring", grew)
	}
	runtime.KeepAlive(c)
}
