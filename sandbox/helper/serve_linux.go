package helper

import (
	"fmt"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// ownProcess prepares the process for an owned Serve (ServeOptions.
// OwnProcess) and starts the goroutine that kills orphans; stop ends it
// after a last round.
func (s *server) ownProcess() (stop func(), err error) {
	if s.runner.pool == nil {
		return nil, fmt.Errorf("own the process: no reaper (commands would be children of serve)")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become a subreaper: %w", err)
	}
	notDumpable()
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, unix.SIGCHLD)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-sigchld:
				if err := s.runner.pool.killOrphans(false); err != nil {
					s.logf("%v", err)
				}
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		signal.Stop(sigchld)
		if err := s.runner.pool.killOrphans(true); err != nil {
			s.logf("%v", err)
		}
	}, nil
}
