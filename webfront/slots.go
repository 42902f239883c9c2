package main

import (
	"net"
	"sync"
	"time"
)

// slots counts open connections per client address and in total, with the same rule as
// scheduler/http/slots.py: a new connection over the per-client cap takes the place of that
// address's least recently active connection nobody is answering; over the total cap, of such a
// connection of the address holding the most; when none can give way it is refused.
type slots struct {
	mu        sync.Mutex
	total     int
	perClient int
	count     int
	byClient  map[string]map[*held]struct{}
	refused   int
	evicted   int
}

type held struct {
	conn   net.Conn
	client string
	busy   bool // a request is being answered on it
	last   time.Time
}

func newSlots(total, perClient int) *slots {
	return &slots{total: total, perClient: perClient, byClient: map[string]map[*held]struct{}{}}
}

// admit registers a new connection of client, closing one that gives way; nil when refused.
func (s *slots) admit(conn net.Conn, client string) *held {
	s.mu.Lock()
	defer s.mu.Unlock()
	var victim *held
	mine := s.byClient[client]
	if len(mine) >= s.perClient {
		victim = leastActive(mine)
		if victim == nil {
			s.refused++
			return nil
		}
	} else if s.count >= s.total {
		var most map[*held]struct{}
		for _, h := range s.byClient {
			if v := leastActive(h); v != nil && (most == nil || len(h) > len(most)) {
				most, victim = h, v
			}
		}
		if victim == nil {
			s.refused++
			return nil
		}
	}
	if victim != nil {
		s.removeLocked(victim)
		s.evicted++
		victim.conn.Close()
	}
	h := &held{conn: conn, client: client, last: time.Now()}
	if s.byClient[client] == nil {
		s.byClient[client] = map[*held]struct{}{}
	}
	s.byClient[client][h] = struct{}{}
	s.count++
	return h
}

func leastActive(hs map[*held]struct{}) *held {
	var best *held
	for h := range hs {
		if !h.busy && (best == nil || h.last.Before(best.last)) {
			best = h
		}
	}
	return best
}

func (s *slots) setBusy(h *held, busy bool) {
	s.mu.Lock()
	h.busy = busy
	h.last = time.Now()
	s.mu.Unlock()
}

func (s *slots) remove(h *held) {
	s.mu.Lock()
	s.removeLocked(h)
	s.mu.Unlock()
}

func (s *slots) removeLocked(h *held) {
	hs := s.byClient[h.client]
	if _, ok := hs[h]; !ok {
		return
	}
	delete(hs, h)
	s.count--
	if len(hs) == 0 {
		delete(s.byClient, h.client)
	}
}

func (s *slots) heldBy(client string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byClient[client])
}
