package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/spool"
	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/identity"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Sender limits.
const (
	// DefaultMaxBatch is the batch size when the server states none.
	DefaultMaxBatch = 500
	// maxBatchBytes keeps a batch well below gRPC's default 4 MiB message limit.
	maxBatchBytes = 3 << 20
	callTimeout   = 30 * time.Second
	// DefaultRevokedRetry is Options.RevokedRetry's default.
	DefaultRevokedRetry = 30 * time.Minute
)

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }

// ClientTLS builds the agent's mutual-TLS configuration (TLS 1.3, the
// client certificate, the server CA) and returns the agent id the client
// certificate names (identity.FromCertificate), the default agent id.
func ClientTLS(c config.Server) (*tls.Config, string, error) {
	tc, _, id, err := RenewingTLS(c, nil)
	return tc, id, err
}

// RenewingTLS is ClientTLS with the client certificate served by a
// Renewer (enroll.Renewer): re-read when its files change, and renewed
// over the agent's connection when Options.Renewer is set to it.
func RenewingTLS(c config.Server, logger *slog.Logger) (*tls.Config, *enroll.Renewer, string, error) {
	t := c.TLS
	r, err := enroll.NewRenewer(t.CertFile, t.KeyFile, logger)
	if err != nil {
		return nil, nil, "", fmt.Errorf("server.tls.cert_file/key_file: %w", err)
	}
	id, err := identity.FromCertificate(r.Leaf())
	if err != nil {
		return nil, nil, "", fmt.Errorf("server.tls.cert_file: %w", err)
	}
	caPEM, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, nil, "", fmt.Errorf("server.tls.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, "", fmt.Errorf("server.tls.ca_file %s: no PEM certificate in it", t.CAFile)
	}
	// Without server_name, each address is checked against its own host
	// name (the connection's authority, see dialServer).
	name := t.ServerName
	if targets := c.Targets(); name == "" && len(targets) == 1 {
		name, _, _ = net.SplitHostPort(targets[0])
	}
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetClientCertificate: r.GetClientCertificate,
		RootCAs:              pool,
		ServerName:           name,
	}, r, id, nil
}

// sendLoop keeps a session with the server, reconnecting with jittered
// exponential backoff.
func (a *Agent) sendLoop(ctx context.Context, conn *grpc.ClientConn) {
	client := plumblinev1.NewAgentServiceClient(conn)
	attempt := 0
	for {
		helloOK, err := a.session(ctx, client, conn)
		a.metrics.connected.Set(0)
		if ctx.Err() != nil {
			return
		}
		if helloOK {
			attempt = 0
		}
		attempt++
		wait := Backoff(attempt, a.o.BackoffBase, a.o.BackoffMax, rand.Float64())
		if hint, ok := RetryAfter(err, a.o.BackoffMax, rand.Float64()); ok {
			wait = max(wait, hint) // the server said when it has room
		}
		a.metrics.sendErrors.Inc()
		if enroll.IsRevoked(err) {
			wait = a.o.RevokedRetry
			a.metrics.revoked.Set(1)
			a.log.Error("the server refuses this agent: its enrollment was revoked (server agent revoke), so nothing is sent. "+
				"Enroll this host again with a new join token (agent enroll --server ADDR --token-file FILE --ca-hash sha256:... --dir DIR), then restart the agent; "+
				"until then it asks again only every "+wait.String(), "err", err, "in", wait)
		} else {
			a.log.Warn("server session ended; reconnecting", "err", err, "in", wait.Round(time.Millisecond))
		}
		if ctxtime.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// connState is what a session watches of its gRPC connection
// (*grpc.ClientConn).
type connState interface {
	GetState() connectivity.State
	WaitForStateChange(ctx context.Context, from connectivity.State) bool
}

// errConnectionLost ends a session whose connection is no longer ready.
var errConnectionLost = errors.New("connection to the server lost")

// session says Hello, then sends whatever the spool holds every report
// interval until a call fails, the connection stops being ready, or ctx
// ends. A session is one connection: gRPC reconnects by itself, but every
// new connection must start with a Hello (the server may be another
// replica, or restored from a backup, and checkServerGeometry compares its
// geometry with the agent's).
//
// The Hello names the incarnation of the oldest records the spool holds
// (those of an earlier run of the agent, see package spool); once they
// are delivered, the session says Hello again with the next one, so the
// server never sees an incarnation speak after a newer one did.
func (a *Agent) session(ctx context.Context, client plumblinev1.AgentServiceClient, conn connState) (helloOK bool, err error) {
	inc := a.spool.SendingIncarnation()
	var server peer.Peer // the replica this connection reached
	hello, err := a.hello(ctx, client, inc, &server)
	if err != nil {
		return false, err
	}
	if d := hello.GetGeometryRefreshInterval().AsDuration(); d >= time.Second {
		a.geomInterval.Store(int64(d))
	}
	if d := hello.GetReportInterval().AsDuration(); d >= 100*time.Millisecond {
		a.reportInterval.Store(int64(d))
	}
	a.applyPolicy(hello.GetPolicy())
	a.applyIntervals() // the central policy's intervals over the Hello answer's
	a.maxBatch.Store(int64(DefaultMaxBatch))
	if n := hello.GetMaxBatchRecords(); n > 0 {
		a.maxBatch.Store(int64(n))
	}
	// Everything of inc at or below the server's high-water mark is settled.
	if err := a.ackHello(inc, hello); err != nil {
		return true, err
	}
	a.metrics.connected.Set(1)
	a.metrics.revoked.Set(0)
	a.log.Info("connected", "server", server.Addr, "incarnation", inc, "high_water", hello.GetHighWaterSequence())
	a.checkServerGeometry(hello.GetGeometryDigest())

	// Watch the connection the Hello went over: when it stops being ready,
	// the session ends and the next one says Hello on the new connection.
	lost := make(chan struct{})
	wctx, stopWatch := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Go(func() {
		if conn.WaitForStateChange(wctx, connectivity.Ready) {
			close(lost)
		}
	})
	// Central policy changes arrive on this connection, without a new Hello.
	watch.Go(func() { a.watchPolicy(wctx, client) })
	defer func() { stopWatch(); watch.Wait() }()
	for {
		if err := a.drain(ctx, client, &inc); err != nil {
			return true, err
		}
		t := time.NewTimer(time.Duration(a.reportInterval.Load()))
		select {
		case <-ctx.Done():
			t.Stop()
			return true, nil
		case <-lost:
			t.Stop()
			return true, errConnectionLost
		case <-t.C:
		}
	}
}

// checkServerGeometry asks the geometry loop for a fresh snapshot when the
// server holds another one than the agent spooled last and that one is no
// longer waiting in the spool: the server's copy was lost (a server
// restored from a backup, a rejected snapshot, the spool's size cap) or
// another agent on the same identity replaced it. Before the first
// discovery there is nothing to compare: the start snapshot is coming.
func (a *Agent) checkServerGeometry(serverDigest []byte) {
	last := a.lastSnap.Load()
	if last == nil || bytes.Equal(last.digest, serverDigest) || a.spool.Pending(last.seq) {
		return
	}
	a.log.Info("the server holds another geometry snapshot than this agent's: sending it again",
		"server_digest", fmt.Sprintf("%x", serverDigest), "agent_digest", fmt.Sprintf("%x", last.digest))
	select {
	case a.resync <- struct{}{}:
	default: // one is already asked for
	}
}

// drain sends batches until the spool holds nothing unacknowledged.
// Each batch is of one incarnation (Spool.Read); when it is another than
// the session's Hello said (*helloInc), drain says Hello with it first.
// The legacy incarnation "" (records of a spool upgraded from before
// incarnations) needs no Hello.
func (a *Agent) drain(ctx context.Context, client plumblinev1.AgentServiceClient, helloInc *string) error {
	for ctx.Err() == nil {
		max := int(a.maxBatch.Load())
		recs, err := a.spool.Read(max, maxBatchBytes)
		if err != nil {
			a.metrics.spoolErrors.Inc()
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		inc := recs[0].Incarnation
		if inc != "" && inc != *helloInc {
			if err := a.rehello(ctx, client, inc); err != nil {
				return err
			}
			*helloInc = inc
			continue // the Hello's high-water mark may have settled some
		}
		req, undecodable := a.batch(recs)
		if len(req.Records) == 0 {
			if err := a.spool.Ack(inc, 0, undecodable); err != nil {
				return err
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := client.Report(rctx, req)
		cancel()
		if wait, ok := RetryAfter(err, a.o.BackoffMax, rand.Float64()); ok {
			// Refused before it was read (the server at capacity, or
			// this agent over its rate): the records stay in the spool
			// and go again when the server asked, on this session.
			a.metrics.refused.Inc()
			a.log.Debug("report refused by the server; keeping the records", "err", err, "retry_in", wait.Round(time.Millisecond))
			if ctxtime.Sleep(ctx, wait) != nil {
				return nil
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if err := a.settle(req, resp, undecodable); err != nil {
			return err
		}
	}
	return nil
}

// batch builds the Report of the spool records recs (one incarnation),
// leaving out and counting the records that do not decode: checksummed yet
// not a record of their sequence, they can never be sent and are settled
// locally (undecodable).
func (a *Agent) batch(recs []spool.Record) (req *plumblinev1.ReportRequest, undecodable []uint64) {
	req = &plumblinev1.ReportRequest{AgentId: a.o.AgentID, FirstSequence: recs[0].Seq, Incarnation: recs[0].Incarnation}
	for _, r := range recs {
		m := &plumblinev1.Record{}
		if err := proto.Unmarshal(r.Data, m); err != nil || m.GetSequence() != r.Seq {
			undecodable = append(undecodable, r.Seq)
			continue
		}
		req.Records = append(req.Records, m)
	}
	if len(undecodable) > 0 {
		a.metrics.spoolErrors.Add(float64(len(undecodable)))
		a.log.Error("undecodable spool records dropped", "sequences", undecodable)
	}
	return req, undecodable
}

// settle acknowledges in the spool what the server's answer to req settled
// (stored, replayed or rejected, and the undecodable records), and counts
// it. A batch of which the server acknowledged nothing is an error.
func (a *Agent) settle(req *plumblinev1.ReportRequest, resp *plumblinev1.ReportResponse, undecodable []uint64) error {
	a.metrics.sent.Add(float64(len(req.Records)))
	settled := append(undecodable, resp.GetAckedSequences()...)
	for _, rj := range resp.GetRejections() {
		settled = append(settled, rj.GetSequence())
		a.log.Warn("record rejected by the server", "sequence", rj.GetSequence(), "reason", rj.GetReason())
	}
	a.metrics.rejected.Add(float64(len(resp.GetRejections())))
	set := map[uint64]bool{}
	for _, q := range settled {
		set[q] = true
	}
	var acked int
	for _, m := range req.Records {
		if m.GetSequence() <= resp.GetHighWaterSequence() || set[m.GetSequence()] {
			acked++
		}
	}
	a.metrics.acked.Add(float64(acked))
	a.metrics.lastReport.SetToCurrentTime()
	if err := a.spool.Ack(req.GetIncarnation(), resp.GetHighWaterSequence(), settled); err != nil {
		a.metrics.spoolErrors.Inc()
		return err
	}
	if acked == 0 {
		return errors.New("report: the server acknowledged none of the batch")
	}
	return nil
}
