// Command toposched-webfront is the webhook's HTTPS front: it terminates TLS (HTTP/1.1
// keep-alive and HTTP/2), keeps the connection caps and deadlines of docs/security.md
// "Servers and network", and forwards each request (path, body) over a Unix socket to the
// Python decider (admission/decider.py), which answers (status, body). `toposched webhook`
// starts it; it exits when the decider's socket stays unreachable (the decider died).
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

type config struct {
	listen, socket                                                     string
	maxConns, perClient, maxBody, maxHead                              int
	handshake, header, body, write, idle, certPoll, answer, statsEvery time.Duration
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("toposched-webfront", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", ":9443", "host:port of the HTTPS listener")
	fs.StringVar(&c.socket, "decider", "", "the Python decider's Unix socket")
	fs.IntVar(&c.maxConns, "max-connections", 1024, "open connections in total")
	fs.IntVar(&c.perClient, "max-connections-per-client", 256, "open connections per client address")
	fs.IntVar(&c.maxBody, "max-body-bytes", 8<<20, "largest request body")
	fs.IntVar(&c.maxHead, "max-head-bytes", 64<<10, "largest request head")
	fs.DurationVar(&c.handshake, "handshake-timeout", 5*time.Second, "TLS handshake, from the accept")
	fs.DurationVar(&c.header, "header-timeout", 10*time.Second, "request head, from its first byte")
	fs.DurationVar(&c.body, "body-timeout", 30*time.Second, "request body, from the head")
	fs.DurationVar(&c.write, "write-timeout", 10*time.Second, "the client takes the answer within this")
	fs.DurationVar(&c.idle, "idle-timeout", 90*time.Second, "a keep-alive connection waits this for its next request")
	fs.DurationVar(&c.certPoll, "cert-poll", 5*time.Second, "how often the serving certificate is asked for")
	fs.DurationVar(&c.answer, "answer-timeout", 30*time.Second, "the decider answers within this")
	fs.DurationVar(&c.statsEvery, "stats-every", 0, "log request counts and where their time went this often (0: never)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.socket == "" {
		return c, fmt.Errorf("--decider is required")
	}
	if c.perClient < 1 || c.maxConns < 1 || c.perClient > c.maxConns {
		return c, fmt.Errorf("need 1 <= --max-connections-per-client (%d) <= --max-connections (%d)", c.perClient, c.maxConns)
	}
	return c, nil
}

// certs holds the serving certificate the decider last gave (its certificate source loads,
// rotates and publishes it: admission/sources.py); new handshakes use the newest.
type certs struct {
	mu      sync.RWMutex
	cert    *tls.Certificate
	pem     string
	d       *decider
	lastErr string
}

func (c *certs) refresh() {
	a, err := c.d.ask("tls", nil)
	if err != nil || a.status != 200 {
		return
	}
	c.mu.RLock()
	same := string(a.body) == c.pem
	c.mu.RUnlock()
	if same {
		return
	}
	pair, err := tls.X509KeyPair(a.body, a.body)
	if err != nil {
		if msg := err.Error(); msg != c.lastErr {
			c.lastErr = msg
			log.Printf("the decider's certificate does not load (%v); keeping the one served so far", err)
		}
		return
	}
	c.mu.Lock()
	c.cert, c.pem = &pair, string(a.body)
	c.mu.Unlock()
	log.Printf("serving a new certificate")
}

func (c *certs) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.cert == nil {
		return nil, fmt.Errorf("no serving certificate yet")
	}
	return c.cert, nil
}

type front struct {
	cfg   config
	d     *decider
	stats stats
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	started := time.Now()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(f.cfg.body))
	_ = rc.SetWriteDeadline(time.Now().Add(f.cfg.body + f.cfg.write))
	path := r.URL.Path
	var body []byte
	switch {
	case r.Method == http.MethodGet && (path == "/healthz" || path == "/readyz"):
	case r.Method == http.MethodPost && len(path) < 1<<16:
		if r.ContentLength > int64(f.cfg.maxBody) {
			f.tooLarge(w, r.ContentLength)
			return
		}
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, int64(f.cfg.maxBody)+1))
		if err != nil {
			w.Header().Set("Connection", "close")
			http.Error(w, "the request body did not arrive in time", http.StatusRequestTimeout)
			return
		}
		if len(body) > f.cfg.maxBody {
			f.tooLarge(w, int64(len(body)))
			return
		}
	default:
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	read := time.Now()
	a, err := f.d.ask(path, body)
	if r.Method == http.MethodPost {
		defer f.stats.add(started, read, time.Now())
	}
	if err != nil {
		http.Error(w, "toposched webhook: the decider is not answering", http.StatusServiceUnavailable)
		return
	}
	_ = rc.SetWriteDeadline(time.Now().Add(f.cfg.write))
	h := w.Header()
	if a.flags&flagText != 0 {
		h.Set("Content-Type", "text/plain")
	} else {
		h.Set("Content-Type", "application/json")
	}
	if a.flags&flagClose != 0 {
		h.Set("Connection", "close") // draining: the API server opens its next one to another replica
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// tooLarge answers as the Python server did: HTTP 413, an AdmissionReview refusal naming the
// limit, and the connection closed (what follows an unread body is not a request).
func (f *front) tooLarge(w http.ResponseWriter, size int64) {
	msg := fmt.Sprintf("toposched webhook: request body of %d bytes: the limit is %d bytes (send Content-Length)", size, f.cfg.maxBody)
	body := fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false,"status":{"code":413,"message":%q}}}`, msg)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = io.WriteString(w, body)
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "toposched-webfront:", err)
		os.Exit(2)
	}
	log.SetPrefix("toposched-webfront: ")
	go exitWithParent()
	d := newDecider(cfg.socket, cfg.answer)
	c := &certs{d: d}
	c.refresh()
	go func() {
		down := time.Time{}
		for range time.Tick(cfg.certPoll) {
			c.refresh()
			if _, err := d.ask("/healthz", nil); err != nil {
				if down.IsZero() {
					down = time.Now()
				} else if time.Since(down) > 30*time.Second {
					log.Fatalf("the decider at %s has not answered for 30 s: exiting", cfg.socket)
				}
			} else {
				down = time.Time{}
			}
		}
	}()
	tcp, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		log.Fatalf("listen on %s: %v", cfg.listen, err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get, NextProtos: []string{"h2", "http/1.1"}}
	ln := newCapListener(tcp, newSlots(cfg.maxConns, cfg.perClient), tlsCfg, cfg.handshake)
	f := &front{cfg: cfg, d: d}
	if cfg.statsEvery > 0 {
		go f.stats.report(cfg.statsEvery, ln)
	}
	srv := &http.Server{
		Handler:           f,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: cfg.header,
		IdleTimeout:       cfg.idle,
		MaxHeaderBytes:    cfg.maxHead,
		ConnState:         ln.connState,
		ErrorLog:          log.New(io.Discard, "", 0), // handshake and client errors: the API server's, not ours
	}
	fmt.Printf("listening on %s\n", tcp.Addr())
	os.Stdout.Sync()
	log.Fatal(srv.Serve(ln))
}

// exitWithParent ends the front as soon as the process that started it (toposched webhook) is
// gone, even when it was SIGKILLed: a front left behind would keep the port and the API server's
// connections, and answer 503s, instead of letting them move to another replica.
func exitWithParent() {
	parent := os.Getppid()
	for range time.Tick(100 * time.Millisecond) {
		if os.Getppid() != parent {
			log.Printf("the webhook process (pid %d) is gone: exiting", parent)
			os.Exit(1)
		}
	}
}
