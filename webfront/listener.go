package main

import (
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// capListener accepts TCP connections within the slots, runs each TLS handshake in a goroutine
// of its own with a deadline (a client that never finishes one holds no other client up), and
// hands http.Server only connections whose handshake is done.
type capListener struct {
	inner      net.Listener
	slots      *slots
	tls        *tls.Config
	handshake  time.Duration
	ready      chan net.Conn
	done       chan struct{}
	mu         sync.Mutex
	held       map[net.Conn]*held
	handshakes int
	closeOnce  sync.Once
}

func newCapListener(inner net.Listener, s *slots, cfg *tls.Config, handshake time.Duration) *capListener {
	l := &capListener{inner: inner, slots: s, tls: cfg, handshake: handshake, ready: make(chan net.Conn, 64),
		done: make(chan struct{}), held: map[net.Conn]*held{}}
	go l.acceptLoop()
	return l
}

func clientHost(addr net.Addr) string {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil {
		if v4 := ip.To4(); v4 != nil {
			return v4.String()
		}
		return ip.String()
	}
	return host
}

func (l *capListener) acceptLoop() {
	for {
		raw, err := l.inner.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors: let some close
			continue
		}
		if tc, ok := raw.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		conn := tls.Server(raw, l.tls)
		h := l.slots.admit(conn, clientHost(raw.RemoteAddr()))
		if h == nil {
			logEvery("refused", "refused a connection from %s: its connections are all being answered", raw.RemoteAddr())
			raw.Close()
			continue
		}
		l.mu.Lock()
		l.held[conn] = h
		l.mu.Unlock()
		go l.finishHandshake(conn, h)
	}
}

func (l *capListener) finishHandshake(conn *tls.Conn, h *held) {
	_ = conn.SetDeadline(time.Now().Add(l.handshake))
	if err := conn.Handshake(); err != nil {
		l.forget(conn)
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	l.mu.Lock()
	l.handshakes++
	l.mu.Unlock()
	select {
	case l.ready <- conn:
	case <-l.done:
		l.forget(conn)
		conn.Close()
	}
}

func (l *capListener) forget(conn net.Conn) {
	l.mu.Lock()
	h := l.held[conn]
	delete(l.held, conn)
	l.mu.Unlock()
	if h != nil {
		l.slots.remove(h)
	}
}

// connState is http.Server.ConnState: keeps the slots' idea of who is being answered current.
func (l *capListener) connState(conn net.Conn, state http.ConnState) {
	switch state {
	case http.StateActive, http.StateIdle:
		l.mu.Lock()
		h := l.held[conn]
		l.mu.Unlock()
		if h != nil {
			l.slots.setBusy(h, state == http.StateActive)
		}
	case http.StateClosed, http.StateHijacked:
		l.forget(conn)
	}
}

func (l *capListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *capListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.inner.Close()
}

func (l *capListener) Addr() net.Addr { return l.inner.Addr() }

var (
	noticeMu   sync.Mutex
	lastNotice = map[string]time.Time{}
)

// logEvery logs one line per kind at most every 10 s, so a flood of refusals cannot flood the log.
func logEvery(kind, format string, args ...any) {
	noticeMu.Lock()
	defer noticeMu.Unlock()
	if time.Since(lastNotice[kind]) < 10*time.Second {
		return
	}
	lastNotice[kind] = time.Now()
	log.Printf(format, args...)
}
