package main

import (
	"log"
	"sync"
	"time"
)

// stats: where the reviews' time went (--stats-every), to tell the front's share from the
// decider's when the API server reports slow calls.
type stats struct {
	mu                  sync.Mutex
	n                   int
	readBody, decide, w time.Duration
}

func (s *stats) add(started, read, answered time.Time) {
	now := time.Now()
	s.mu.Lock()
	s.n++
	s.readBody += read.Sub(started)
	s.decide += answered.Sub(read)
	s.w += now.Sub(answered)
	s.mu.Unlock()
}

func (s *stats) report(every time.Duration, l *capListener) {
	for range time.Tick(every) {
		s.mu.Lock()
		n, rb, d, w := s.n, s.readBody, s.decide, s.w
		s.n, s.readBody, s.decide, s.w = 0, 0, 0, 0
		s.mu.Unlock()
		l.mu.Lock()
		hs := l.handshakes
		l.handshakes = 0
		l.mu.Unlock()
		if n == 0 && hs == 0 {
			continue
		}
		k := time.Duration(max(n, 1))
		log.Printf("%d reviews, %d TLS handshakes; mean per review: body read %v, decider %v, rest of the handler %v",
			n, hs, rb/k, d/k, w/k)
	}
}
