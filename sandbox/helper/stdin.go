package helper

import (
	"os"
	"sync"
)

// stdinFeed queues stdin messages for one command and writes them to the
// command's stdin pipe on its own goroutine, so that a command that does not
// read never blocks the request loop.
type stdinFeed struct {
	w    *os.File
	wake chan struct{}
	done chan struct{}

	mu      sync.Mutex
	chunks  [][]byte
	eof     bool
	stopped bool
	running bool
}

// newStdinFeed returns a feed and the pipe end to give the command.
func newStdinFeed() (*stdinFeed, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	return &stdinFeed{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}, r, nil
}

func (f *stdinFeed) push(data []byte, eof bool) {
	f.mu.Lock()
	if len(data) > 0 {
		f.chunks = append(f.chunks, data)
	}
	f.eof = f.eof || eof
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run starts the goroutine that writes to the pipe.
func (f *stdinFeed) run() {
	f.mu.Lock()
	f.running = true
	f.mu.Unlock()
	go func() {
		defer close(f.done)
		defer f.w.Close()
		for {
			f.mu.Lock()
			chunks, eof, stopped := f.chunks, f.eof, f.stopped
			f.chunks = nil
			f.mu.Unlock()
			if stopped {
				return
			}
			for _, c := range chunks {
				if _, err := f.w.Write(c); err != nil {
					return
				}
			}
			if eof {
				return
			}
			<-f.wake
		}
	}()
}

// stop ends the goroutine, unblocking a pending write, and waits for it.
func (f *stdinFeed) stop() {
	f.mu.Lock()
	f.stopped = true
	running := f.running
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	_ = f.w.Close()
	if running {
		<-f.done
	}
}
