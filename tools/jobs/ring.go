package jobs

import (
	"fmt"
	"sync"
)

// RingSize is how much of a job's output is kept: the newest RingSize
// bytes; what came before is dropped, and a read that reaches into it says
// so.
const RingSize = 1 << 20

// Ring keeps the newest bytes written to it, at most its size, however much
// is written. Offsets count every byte ever written (the first byte is
// offset 0), so a reader can ask for what came after what it saw. It is
// safe for concurrent use; Write never blocks on a reader.
type Ring struct {
	mu    sync.Mutex
	buf   []byte // len(buf) == size once full; grows up to it
	size  int
	total int64 // bytes ever written
	// changed is closed (and replaced) on every write, so that waiters
	// wake without polling.
	changed chan struct{}
}

// NewRing returns a ring that keeps the newest size bytes.
func NewRing(size int) *Ring {
	if size <= 0 {
		size = RingSize
	}
	return &Ring{size: size, changed: make(chan struct{})}
}

// Write implements io.Writer; it always takes all of p.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total += int64(n)
	if n >= r.size {
		// Only the tail of p survives.
		if cap(r.buf) < r.size {
			r.buf = make([]byte, r.size)
		}
		r.buf = r.buf[:r.size]
		tail := p[n-r.size:]
		at := int((r.total - int64(r.size)) % int64(r.size))
		k := copy(r.buf[at:], tail)
		copy(r.buf, tail[k:])
		r.wake()
		return n, nil
	}
	if len(r.buf) < r.size {
		// Still filling: append, but never past size.
		room := r.size - len(r.buf)
		if n <= room {
			r.buf = append(r.buf, p...)
			r.wake()
			return n, nil
		}
		r.buf = append(r.buf, p[:room]...)
		p = p[room:]
	}
	// Full: the buffer is a circle whose start is at total % size.
	start := int((r.total - int64(len(p))) % int64(r.size))
	k := copy(r.buf[start:], p)
	copy(r.buf, p[k:])
	r.wake()
	return n, nil
}

func (r *Ring) wake() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Total is the number of bytes ever written.
func (r *Ring) Total() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Changed returns a channel closed at the next write.
func (r *Ring) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Chunk is what a read of the ring found.
type Chunk struct {
	// Data is the output from From to Next.
	Data []byte
	// From is the offset of Data's first byte; Next the offset after its
	// last (the next read's since).
	From, Next int64
	// Dropped counts the bytes asked for that the ring no longer holds
	// (they came before From).
	Dropped int64
}

// Marker is the line that stands for dropped output, empty when nothing
// was dropped.
func (c Chunk) Marker() string {
	if c.Dropped == 0 {
		return ""
	}
	return fmt.Sprintf("[... %d bytes of earlier output dropped: only the last %d bytes are kept ...]", c.Dropped, RingSize)
}

// Since returns what was written from offset since on (a negative since
// is 0; one past the end is the end).
func (r *Ring) Since(since int64) Chunk {
	r.mu.Lock()
	defer r.mu.Unlock()
	since = max(since, 0)
	since = min(since, r.total)
	oldest := r.total - int64(len(r.buf))
	c := Chunk{From: since, Next: r.total}
	if since < oldest {
		c.Dropped = oldest - since
		c.From = oldest
	}
	c.Data = r.copyFrom(c.From)
	return c
}

// Tail returns the last n lines written (a trailing newline does not start
// a line), or everything the ring holds when it has fewer.
func (r *Ring) Tail(n int) Chunk {
	r.mu.Lock()
	oldest := r.total - int64(len(r.buf))
	all := r.copyFrom(oldest)
	total := r.total
	r.mu.Unlock()
	cut := len(all)
	if cut > 0 && all[cut-1] == '\n' {
		cut--
	}
	lines := 0
	start := 0
	for i := cut - 1; i >= 0; i-- {
		if all[i] == '\n' {
			lines++
			if lines == n {
				start = i + 1
				break
			}
		}
	}
	c := Chunk{Data: all[start:], From: oldest + int64(start), Next: total}
	if start == 0 && oldest > 0 {
		c.Dropped = oldest // the lines asked for may reach into what is gone
	}
	return c
}

// copyFrom copies the bytes from offset off (>= the oldest kept) to the
// end. r.mu is held.
func (r *Ring) copyFrom(off int64) []byte {
	n := int(r.total - off)
	out := make([]byte, n)
	if len(r.buf) < r.size {
		copy(out, r.buf[len(r.buf)-n:])
		return out
	}
	start := int(off % int64(r.size))
	k := copy(out, r.buf[start:])
	copy(out[k:], r.buf)
	return out
}
