package ingest

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/devca"
)

// syncBuffer is a log destination written by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the log lines with msg, decoded.
func (s *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// A refused TLS handshake is logged with the peer's address and the
// reason (issue 11: the server said nothing), once per peer and reason
// per period; the next line says how many were left out.
func TestRefusedHandshakeLogged(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	var clock, reads atomic.Int64
	clock.Store(testNow.UnixNano())
	// The server reads its clock once per refused handshake, after the
	// handshake failed; nothing else reads it here (no call gets through).
	now := func() time.Time { reads.Add(1); return time.Unix(0, clock.Load()) }
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Now: now})

	// A client certificate from a CA the server does not trust.
	other, err := devca.Create(filepath.Join(t.TempDir(), "other-ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := other.IssueAgent("intruder")
	if err != nil {
		t.Fatal(err)
	}
	handshake := func() {
		t.Helper()
		tc := clientTLS(e.pki.ca.Pool(), leaf)
		tc.NextProtos = []string{"h2"}
		conn, err := tls.Dial("tcp", e.addr, tc)
		if err == nil {
			// TLS 1.3: the server checks the client's certificate after
			// the client is done; its refusal arrives on the first read.
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil {
			t.Fatal("handshake with an untrusted client certificate succeeded")
		}
	}
	waitLines := func(n int) []map[string]any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := buf.lines(t, "TLS handshake refused")
			if len(got) >= n || time.Now().After(deadline) {
				return got
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	handshake()
	got := waitLines(1)
	if len(got) != 1 {
		t.Fatalf("%d lines about the refused handshake, want 1", len(got))
	}
	if got[0]["peer"] != "127.0.0.1" || !strings.Contains(got[0]["reason"].(string), "certificate") || got[0]["level"] != "WARN" {
		t.Fatalf("log line %v: want level WARN, peer 127.0.0.1 and a reason about the certificate", got[0])
	}
	before := reads.Load()
	for range 5 {
		handshake()
	}
	// The client sees the refusal before the server logs it: wait for the
	// server's side of all five.
	deadline := time.Now().Add(10 * time.Second)
	for reads.Load() < before+5 {
		if time.Now().After(deadline) {
			t.Fatalf("the server handled %d of 5 refused handshakes", reads.Load()-before)
		}
		time.Sleep(time.Millisecond)
	}
	if got := buf.lines(t, "TLS handshake refused"); len(got) != 1 {
		t.Fatalf("%d lines after 6 refusals within %s, want 1: %v", len(got), handshakeLogEvery, got)
	}
	clock.Add(int64(handshakeLogEvery))
	handshake()
	got = waitLines(2)
	if len(got) != 2 || got[1]["suppressed"] != float64(5) {
		t.Fatalf("lines %v: want a second one saying 5 were suppressed", got)
	}
}
