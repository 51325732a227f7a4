package store

import (
	"sync"
	"time"
)

// DefaultSaveDelay is how long a Saver lets changes gather before it
// writes them.
const DefaultSaveDelay = 400 * time.Millisecond

// Saver saves a session in the background: Update (called on every history
// change) hands it the newest record, and a goroutine writes it at most
// delay after the first unsaved change, however fast changes keep coming.
// Flush writes at once (/save); Close stops the goroutine and writes what
// is pending. A failed save is retried with the next change, Flush or
// Close.
//
// A Saver serves one session: the first record fixes its id and creation
// time (made up when empty) and later records may leave them, and the
// title, empty.
type Saver struct {
	store   *Store
	delay   time.Duration
	onError func(error)

	mu      sync.Mutex
	pending *Record
	closed  bool
	id      string    // the session's id, fixed by the first Update
	created time.Time // its creation time
	title   string    // the title of the last save

	// saveMu orders saves: a record is taken and written under it, so an
	// older record never overwrites a newer one.
	saveMu sync.Mutex

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewSaver starts a saver writing to st. delay <= 0 means
// DefaultSaveDelay. onError (may be nil) hears of background save
// failures; it is called from the saver's goroutine.
func NewSaver(st *Store, delay time.Duration, onError func(error)) *Saver {
	if delay <= 0 {
		delay = DefaultSaveDelay
	}
	s := &Saver{
		store:   st,
		delay:   delay,
		onError: onError,
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go s.run()
	return s
}

// Update makes rec the record to save. A record without messages is not
// saved (an empty session leaves no file). rec is kept, not copied: its
// slices must not change afterwards (agent.Config.OnChange passes a copy).
// After Close, Update saves at once.
func (s *Saver) Update(rec Record) {
	if len(rec.Messages) == 0 {
		return
	}
	s.mu.Lock()
	if s.id == "" { // the first record fixes the session's id and creation time
		s.id, s.created = rec.ID, rec.CreatedAt
		if s.id == "" {
			s.id = NewID()
		}
		if s.created.IsZero() {
			s.created = time.Now().UTC()
		}
	}
	if rec.ID == "" {
		rec.ID = s.id
	}
	if rec.CreatedAt.IsZero() && rec.ID == s.id {
		rec.CreatedAt = s.created
	}
	s.pending = &rec
	closed := s.closed
	s.mu.Unlock()
	if closed {
		if err := s.flush(); err != nil && s.onError != nil {
			s.onError(err)
		}
		return
	}
	select {
	case s.kick <- struct{}{}:
	default: // a kick is already waiting
	}
}

// Flush saves the pending record now.
func (s *Saver) Flush() error { return s.flush() }

// Close stops the background goroutine and saves the pending record. It
// may be called more than once.
func (s *Saver) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		<-s.done
	})
	return s.flush()
}

// ID is the session's id, "" before the first Update.
func (s *Saver) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

func (s *Saver) run() {
	defer close(s.done)
	var timer *time.Timer
	var fire <-chan time.Time // nil while nothing is due
	for {
		select {
		case <-s.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-s.kick:
			if fire == nil {
				timer = time.NewTimer(s.delay)
				fire = timer.C
			}
		case <-fire:
			fire = nil
			if err := s.flush(); err != nil && s.onError != nil {
				s.onError(err)
			}
		}
	}
}

func (s *Saver) flush() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	rec := s.pending
	s.pending = nil
	if rec != nil && rec.Title == "" && rec.ID == s.id {
		rec.Title = s.title
	}
	s.mu.Unlock()
	if rec == nil {
		return nil
	}
	err := s.store.Save(rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.pending == nil {
			s.pending = rec // retry with the next change, Flush or Close
		}
		return err
	}
	if rec.ID == s.id {
		s.title = rec.Title
	}
	return nil
}
