package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// The frames to and from the Python decider (admission/decider.py), big-endian:
//
//	request:  id u32 | path length u16 | body length u32 | path | body
//	answer:   id u32 | status u16 | flags u8 | body length u32 | body
//
// Answers may come in any order (a denial is confirmed by a pool thread); id pairs them.
const (
	flagClose = 1 // close the client's connection after this answer (the decider is draining)
	flagText  = 2 // the body is text/plain (probes), not an AdmissionReview
)

type answer struct {
	status int
	flags  byte
	body   []byte
}

type decider struct {
	path    string
	timeout time.Duration
	mu      sync.Mutex // guards conn, w, pending, next
	conn    net.Conn
	w       *bufio.Writer
	pending map[uint32]chan answer
	next    uint32
}

var errDecider = errors.New("the decider is not answering")

func newDecider(path string, timeout time.Duration) *decider {
	return &decider{path: path, timeout: timeout, pending: map[uint32]chan answer{}}
}

// connectLocked dials the decider's socket when there is no connection (mu held).
func (d *decider) connectLocked() error {
	if d.conn != nil {
		return nil
	}
	conn, err := net.DialTimeout("unix", d.path, time.Second)
	if err != nil {
		return err
	}
	d.conn, d.w = conn, bufio.NewWriterSize(conn, 64*1024)
	go d.readLoop(conn)
	return nil
}

func (d *decider) readLoop(conn net.Conn) {
	r := bufio.NewReaderSize(conn, 64*1024)
	var head [11]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			break
		}
		id := binary.BigEndian.Uint32(head[0:4])
		a := answer{status: int(binary.BigEndian.Uint16(head[4:6])), flags: head[6]}
		a.body = make([]byte, binary.BigEndian.Uint32(head[7:11]))
		if _, err := io.ReadFull(r, a.body); err != nil {
			break
		}
		d.mu.Lock()
		ch := d.pending[id]
		delete(d.pending, id)
		d.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
	d.mu.Lock()
	if d.conn == conn {
		d.conn, d.w = nil, nil
		for id, ch := range d.pending { // what was sent on this connection gets no answer now
			delete(d.pending, id)
			close(ch)
		}
	}
	d.mu.Unlock()
	conn.Close()
}

// ask sends one (path, body) and waits for its answer.
func (d *decider) ask(path string, body []byte) (answer, error) {
	ch := make(chan answer, 1)
	d.mu.Lock()
	if err := d.connectLocked(); err != nil {
		d.mu.Unlock()
		return answer{}, errDecider
	}
	d.next++
	id := d.next
	d.pending[id] = ch
	var head [10]byte
	binary.BigEndian.PutUint32(head[0:4], id)
	binary.BigEndian.PutUint16(head[4:6], uint16(len(path)))
	binary.BigEndian.PutUint32(head[6:10], uint32(len(body)))
	_, err := d.w.Write(head[:])
	if err == nil {
		_, err = d.w.WriteString(path)
	}
	if err == nil {
		_, err = d.w.Write(body)
	}
	if err == nil {
		err = d.w.Flush()
	}
	if err != nil {
		delete(d.pending, id)
		d.conn.Close() // the read loop clears it and fails what else was sent
		d.mu.Unlock()
		return answer{}, errDecider
	}
	d.mu.Unlock()
	timer := time.NewTimer(d.timeout)
	defer timer.Stop()
	select {
	case a, ok := <-ch:
		if !ok {
			return answer{}, errDecider
		}
		return a, nil
	case <-timer.C:
		d.mu.Lock()
		delete(d.pending, id)
		d.mu.Unlock()
		return answer{}, errDecider
	}
}
