package ingest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/plumbline/plumbline/internal/server/devca"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// h2conn is a hand-made HTTP/2 client over TLS, to do what no gRPC client
// does: announce a large message and never send it, holding the call open
// in the middle of its read (a slow or hostile sender).
type h2conn struct {
	conn     *tls.Conn
	mu       sync.Mutex // writes to fr
	fr       *http2.Framer
	settings chan http2.Setting // the server's SETTINGS, as they arrive
	events   chan streamEvent   // what the server sent on each stream
	next     uint32
}

// streamEvent is the server's first word on a stream: HEADERS (with its
// grpc-status, an answer) or a WINDOW_UPDATE (it is reading the message).
type streamEvent struct {
	stream uint32
	window uint32 // a WINDOW_UPDATE's increment; 0 for HEADERS
	status string // grpc-status of HEADERS
}

// dialH2 connects with a certificate for id ("" for none).
func dialH2(t *testing.T, e *env, id string) *h2conn {
	t.Helper()
	var leaf *devca.Leaf
	if id != "" {
		var err error
		if leaf, err = e.pki.ca.IssueAgent(id); err != nil {
			t.Fatal(err)
		}
	}
	tc := clientTLS(e.pki.ca.Pool(), leaf)
	tc.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", e.addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	c := &h2conn{conn: conn, fr: http2.NewFramer(conn, conn), settings: make(chan http2.Setting, 16), events: make(chan streamEvent, 64), next: 1}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go c.readLoop()
	return c
}

// readLoop answers SETTINGS and PINGs until the connection closes.
func (c *h2conn) readLoop() {
	fr := http2.NewFramer(io.Discard, c.conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			close(c.settings)
			close(c.events)
			return
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			c.event(streamEvent{stream: f.StreamID, status: f.PseudoValue("status") + "/" + headerValue(f, "grpc-status")})
		case *http2.WindowUpdateFrame:
			if f.StreamID != 0 {
				c.event(streamEvent{stream: f.StreamID, window: f.Increment})
			}
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			_ = f.ForeachSetting(func(s http2.Setting) error {
				select {
				case c.settings <- s:
				default:
				}
				return nil
			})
			c.mu.Lock()
			_ = c.fr.WriteSettingsAck()
			c.mu.Unlock()
		case *http2.PingFrame:
			if !f.IsAck() {
				c.mu.Lock()
				_ = c.fr.WritePing(true, f.Data)
				c.mu.Unlock()
			}
		}
	}
}

func (c *h2conn) event(e streamEvent) {
	select {
	case c.events <- e:
	default:
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, h := range f.Fields {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// announce opens a Report call whose message says it has n bytes and
// sends only the first few of them.
func (c *h2conn) announce(t *testing.T, n uint32) uint32 {
	t.Helper()
	return c.announceCall(t, "/plumbline.v1.AgentService/Report", n)
}

// announceCall opens a call of method whose message says it has n bytes
// and sends only the first few of them; it returns the stream's id.
func (c *h2conn) announceCall(t *testing.T, method string, n uint32) uint32 {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "https"}, {":path", method},
		{":authority", "localhost"}, {"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next += 2
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	prefix := make([]byte, 5+16)
	binary.BigEndian.PutUint32(prefix[1:5], n)
	if err := c.fr.WriteData(id, false, prefix); err != nil {
		t.Fatal(err)
	}
	return id
}

// firstWord is the server's first word on stream id.
func (c *h2conn) firstWord(t *testing.T, id uint32) streamEvent {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-c.events:
			if !ok {
				t.Fatalf("stream %d: connection closed before the server answered", id)
			}
			if e.stream == id {
				return e
			}
		case <-timeout:
			t.Fatalf("stream %d: the server said nothing", id)
		}
	}
}

func reportOK(t *testing.T, c plumblinev1.AgentServiceClient, id string, seq uint64, timeout time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := c.Report(ctx, &plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{probeRecord(seq)}})
	return err
}

// An agent's calls may hold at most MaxAgentInflightBytes before their
// messages are read: two calls stuck in the middle of a 1 MiB message
// hold its 2 MiB, so its next call is refused at once — before gRPC reads
// a byte of it — while another agent is served. When the stuck calls end,
// the agent's budget is whole again.
func TestAgentInflightBytesBound(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{
		MaxRecvMsgSize: 1 << 20, MaxAgentInflightBytes: 2 << 20, MaxInflightBytes: 64 << 20, RatePerSecond: -1,
	})
	a, b := e.agent(t, "greedy"), e.agent(t, "bystander")
	hello(t, a, "greedy")
	hello(t, b, "bystander")
	raw := dialH2(t, e, "greedy")
	raw.announce(t, 1<<20)
	raw.announce(t, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for e.svc.adm.agentInflight("greedy") < 2<<20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	err := reportOK(t, a, "greedy", 1, 10*time.Second)
	wantCode(t, "third call of greedy", err, codes.ResourceExhausted, "in flight")
	if err := reportOK(t, b, "bystander", 1, 10*time.Second); err != nil {
		t.Fatalf("bystander: %v", err)
	}
	raw.conn.Close()
	for e.svc.adm.agentInflight("greedy") != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.svc.adm.agentInflight("greedy"); got != 0 {
		t.Fatalf("greedy still holds %d bytes after its calls ended", got)
	}
	if err := reportOK(t, a, "greedy", 1, 10*time.Second); err != nil {
		t.Fatalf("greedy after its stuck calls ended: %v", err)
	}
}

// The server as a whole holds at most MaxInflightBytes of messages being
// read: with every byte of it held by stuck calls, another agent's call
// waits (here: past its deadline) instead of being read, and goes through
// once the stuck calls end.
func TestTotalInflightBytesBound(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{
		MaxRecvMsgSize: 1 << 20, MaxAgentInflightBytes: 2 << 20, MaxInflightBytes: 2 << 20, RatePerSecond: -1,
	})
	c := e.agent(t, "patient")
	hello(t, c, "patient")
	r1, r2 := dialH2(t, e, "stuck-1"), dialH2(t, e, "stuck-2")
	r1.announce(t, 1<<20)
	r2.announce(t, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	// Both reached the read (the stats handler's Begin) once the server's
	// budget is held in full.
	for e.svc.adm.agents.TryAcquire(1) {
		e.svc.adm.agents.Release(1)
		if time.Now().After(deadline) {
			t.Fatalf("the stuck calls hold %d+%d bytes of their agents' budgets, but not the server's whole budget",
				e.svc.adm.agentInflight("stuck-1"), e.svc.adm.agentInflight("stuck-2"))
		}
		time.Sleep(time.Millisecond)
	}
	err := reportOK(t, c, "patient", 1, 500*time.Millisecond)
	wantCode(t, "call while the budget is held", err, codes.DeadlineExceeded, "")
	r1.conn.Close()
	if err := reportOK(t, c, "patient", 1, 10*time.Second); err != nil {
		t.Fatalf("call after a stuck call ended: %v", err)
	}
}

// Every connection says how many calls it may carry at once.
func TestMaxConcurrentStreamsAnnounced(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	raw := dialH2(t, e, "counter")
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s, ok := <-raw.settings:
			if !ok {
				t.Fatal("connection closed before SETTINGS_MAX_CONCURRENT_STREAMS")
			}
			if s.ID == http2.SettingMaxConcurrentStreams {
				if s.Val != DefaultMaxConcurrentStreams {
					t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", s.Val, DefaultMaxConcurrentStreams)
				}
				return
			}
		case <-timeout:
			t.Fatal("no SETTINGS_MAX_CONCURRENT_STREAMS from the server")
		}
	}
}

// Without certificates (--insecure, tests only) no call has an identity
// before it is decoded: many agents behind one address are not held to one
// agent's budget.
func TestInsecureAgentsShareNoBudget(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), nil, Options{Insecure: true, MaxRecvMsgSize: 1 << 20, MaxAgentInflightBytes: 1 << 20, RatePerSecond: -1})
	c := dial(t, e.addr, insecure.NewCredentials())
	const n = 20
	for i := range n {
		hello(t, c, fmt.Sprintf("plain-%d", i))
	}
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- reportOK(t, c, fmt.Sprintf("plain-%d", i), 1, 30*time.Second) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Report: %v", err)
		}
	}
}
