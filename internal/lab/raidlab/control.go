//go:build linux

package raidlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// The control interface is HTTP over the lab's Unix socket
// (<state dir>/control.sock, mode 0600):
//
//	GET  /stats   the array's counters and faults (Stats, JSON)
//	GET  /state   the lab's State (JSON)
//	POST /fault   apply a Fault (JSON body); 400 with the reason if refused
func (l *Lab) serveControl() error {
	os.Remove(l.Control)
	ln, err := net.Listen("unix", l.Control)
	if err != nil {
		return fmt.Errorf("raidlab: control socket: %w", err)
	}
	if err := os.Chmod(l.Control, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("raidlab: control socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, l.arr.Stats())
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, l.State)
	})
	mux.HandleFunc("POST /fault", func(w http.ResponseWriter, r *http.Request) {
		var f Fault
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			http.Error(w, "bad fault: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := l.Fault(f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, l.arr.Stats())
	})
	l.ln = ln
	l.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go l.http.Serve(ln) // ends when Close shuts the server down
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// Client talks to a lab's control socket.
type Client struct {
	hc *http.Client
}

// NewClient returns a client for the control socket at path.
func NewClient(path string) *Client {
	return &Client{hc: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}}
}

// Stats fetches the array's counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	return s, c.do(ctx, http.MethodGet, "/stats", nil, &s)
}

// Fault applies a fault and returns the counters after it.
func (c *Client) Fault(ctx context.Context, f Fault) (Stats, error) {
	var s Stats
	b, err := json.Marshal(f)
	if err != nil {
		return s, err
	}
	return s, c.do(ctx, http.MethodPost, "/fault", b, &s)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://raidlab"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("raidlab: control: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("raidlab: control: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("raidlab: control %s %s: %s", method, path, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return errors.Join(fmt.Errorf("raidlab: control %s: bad answer", path), err)
	}
	return nil
}
