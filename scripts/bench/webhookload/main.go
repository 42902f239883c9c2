// Command webhookload sends AdmissionReviews to a webhook over HTTPS from its own process, as
// the API server does (Go's HTTP client, keep-alive, HTTP/1.1 or with -h2 HTTP/2), and prints
// p50 / p99 / mean. scripts/bench/webhook.py builds and runs it; nothing here is in toposched.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "")
	ca := flag.String("ca", "", "")
	body := flag.String("body", "", "")
	n := flag.Int("n", 400, "")
	c := flag.Int("c", 4, "")
	h2 := flag.Bool("h2", false, "")
	flag.Parse()
	pem, _ := os.ReadFile(*ca)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	data, _ := os.ReadFile(*body)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 100, ForceAttemptHTTP2: *h2}
	if !*h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	cl := &http.Client{Transport: tr}
	var mu sync.Mutex
	var lat []float64
	var wg sync.WaitGroup
	proto := ""
	for k := 0; k < *c; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < *n / *c; i++ {
				t0 := time.Now()
				resp, err := cl.Post(*url, "application/json", bytes.NewReader(data))
				if err != nil {
					fmt.Println(err)
					os.Exit(1)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(answer, []byte(`"allowed":true`)) {
					fmt.Fprintf(os.Stderr, "HTTP %d: %s\n", resp.StatusCode, answer)
					os.Exit(1)
				}
				d := float64(time.Since(t0).Microseconds()) / 1000
				mu.Lock()
				lat = append(lat, d)
				proto = resp.Proto
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Float64s(lat)
	s := 0.0
	for _, v := range lat {
		s += v
	}
	fmt.Printf("{\"proto\":%q,\"n\":%d,\"p50\":%.3f,\"p99\":%.3f,\"mean\":%.3f}\n", proto, len(lat), lat[len(lat)/2], lat[len(lat)*99/100], s/float64(len(lat)))
}
