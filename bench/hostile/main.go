// Command hostile fires the memory attack of issue 11 §2 at a real server:
// ROUNDS rounds of REPORTS concurrent Reports of about SIZE bytes each,
// from AGENTS agent certificates (default one), over mutual TLS. Half of the Reports
// carry one probe record with an unknown field of SIZE bytes (a record
// that is otherwise valid), half one probe record whose mount point is a
// SIZE-byte string (a record the server rejects). It prints, per round,
// how many calls ended with which status. bench/hostile.sh starts the
// server and measures its memory around it.
//
//	hostile --dev-dir DIR/dev [--reports 200] [--rounds 3] [--size 3993600] [--agents 1] [--conns 1]
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

func run() error {
	devDir := flag.String("dev-dir", "", "the `DIR/dev` directory of `server --dev --data-dir DIR`")
	reports := flag.Int("reports", 200, "concurrent Reports per round")
	rounds := flag.Int("rounds", 3, "rounds")
	size := flag.Int("size", 3900<<10, "bytes of hostile payload per Report")
	conns := flag.Int("conns", 1, "TLS connections per agent the Reports are spread over")
	agents := flag.Int("agents", 1, "agent certificates the Reports are spread over (hostile-1, hostile-2, ...)")
	mode := flag.String("mode", "reports", "reports (Reports with certificates), watch (WatchPolicy long-polls of one agent), or a flood without a certificate: anon-renew, anon-check, anon-enroll, anon-bundle")
	hold := flag.Duration("hold", 10*time.Second, "how long --mode watch holds its calls")
	flag.Parse()
	if *devDir == "" {
		return errors.New("--dev-dir is required")
	}
	if strings.HasPrefix(*mode, "anon-") {
		return runFlood(*devDir, *mode, *size, *reports, *rounds, *conns)
	}
	ctx := context.Background()
	clients, closeAll, err := connect(ctx, *devDir, *agents, *conns)
	defer closeAll()
	if err != nil {
		return err
	}
	if *mode == "watch" {
		runWatch(clients, *reports, *hold)
		return nil
	}
	// Build the requests once (they are the client's memory, not the server's).
	reqs := make([]*plumblinev1.ReportRequest, *reports)
	for i := range reqs {
		reqs[i] = &plumblinev1.ReportRequest{AgentId: clients[i%len(clients)].id, Records: []*plumblinev1.Record{record(1, i%2 == 0, *size)}}
	}
	fmt.Printf("%d rounds of %d concurrent Reports of %.2f MiB from %d certificate(s) over %d connection(s) each\n", *rounds, *reports, float64(*size)/(1<<20), *agents, *conns)
	var seq uint64 = 1
	for r := range *rounds {
		start := time.Now()
		codes := sendRound(ctx, clients, reqs, &seq)
		fmt.Printf("round %d: %s in %.1fs\n", r+1, codes, time.Since(start).Seconds())
	}
	return nil
}

// client is one TLS connection with one agent's certificate.
type client struct {
	id string
	c  plumblinev1.AgentServiceClient
}

// connect issues agent certificates hostile-1..agents from the dev CA
// beside devDir, opens conns connections for each and says Hello once per
// agent. closeAll closes what was opened, also after an error.
func connect(ctx context.Context, devDir string, agents, conns int) (clients []client, closeAll func(), err error) {
	var open []*grpc.ClientConn
	closeAll = func() {
		for _, cc := range open {
			cc.Close()
		}
	}
	ac, err := config.Load(filepath.Join(devDir, "agent.yaml"))
	if err != nil {
		return nil, closeAll, err
	}
	ca, err := devca.Load(filepath.Join(devDir, "..", "ca"))
	if err != nil {
		return nil, closeAll, err
	}
	pem, err := os.ReadFile(filepath.Join(devDir, "ca.crt"))
	if err != nil {
		return nil, closeAll, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	host, _, _ := net.SplitHostPort(ac.Server.Address)
	if ac.Server.TLS.ServerName != "" {
		host = ac.Server.TLS.ServerName
	}
	for a := range agents {
		id := fmt.Sprintf("hostile-%d", a+1)
		leaf, err := ca.IssueAgent(id)
		if err != nil {
			return nil, closeAll, err
		}
		tc := &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{leaf.TLSCertificate()}}
		for range conns {
			cc, err := grpc.NewClient(ac.Server.Address, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
				grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
			if err != nil {
				return nil, closeAll, err
			}
			open = append(open, cc)
			clients = append(clients, client{id, plumblinev1.NewAgentServiceClient(cc)})
		}
		if _, err := clients[len(clients)-1].c.Hello(ctx, &plumblinev1.HelloRequest{AgentId: id, Host: &plumblinev1.Host{Hostname: id, Os: "linux"}, AgentVersion: "hostile"}); err != nil {
			return nil, closeAll, fmt.Errorf("hello: %w", err)
		}
	}
	return clients, closeAll, nil
}

// sendRound sends every request at once, spread over the clients, with
// the next sequence numbers, and counts the calls by status code
// ("Code=N ..." sorted).
func sendRound(ctx context.Context, clients []client, reqs []*plumblinev1.ReportRequest, seq *uint64) string {
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for i, req := range reqs {
		req.Records[0].Sequence = *seq
		*seq++
		wg.Add(1)
		go func(c plumblinev1.AgentServiceClient, req *plumblinev1.ReportRequest) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			_, err := c.Report(cctx, req)
			mu.Lock()
			codes[status.Code(err).String()]++
			mu.Unlock()
		}(clients[i%len(clients)].c, cloneSeq(req))
	}
	wg.Wait()
	var parts []string
	for c, n := range codes {
		parts = append(parts, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// cloneSeq copies the envelope and the record header (the big payload is shared).
func cloneSeq(req *plumblinev1.ReportRequest) *plumblinev1.ReportRequest {
	old := req.Records[0]
	r := &plumblinev1.Record{Sequence: old.Sequence, ProducedAt: old.ProducedAt, Payload: old.Payload}
	r.ProtoReflect().SetUnknown(old.ProtoReflect().GetUnknown())
	return &plumblinev1.ReportRequest{AgentId: req.AgentId, Records: []*plumblinev1.Record{r}}
}

// record is a probe record carrying size hostile bytes: as an unknown
// field of an otherwise valid record, or as its mount point (rejected).
func record(seq uint64, unknown bool, size int) *plumblinev1.Record {
	h := &histogram.Histogram{}
	for range 10 {
		h.Observe(time.Millisecond)
	}
	now := time.Now()
	p := &plumblinev1.ProbeResult{
		MountPoint: "/data", Device: "sdb", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 1,
		Ops: 10, Bytes: 10 * 8192, Duration: durationpb.New(time.Second), StartedAt: timestamppb.New(now.Add(-time.Minute)),
		Latency: wire.HistogramToProto(h),
	}
	rec := &plumblinev1.Record{Sequence: seq, ProducedAt: timestamppb.New(now), Payload: &plumblinev1.Record_Probe{Probe: p}}
	if unknown {
		var b []byte
		b = protowire.AppendTag(b, 9999, protowire.BytesType)
		b = protowire.AppendBytes(b, make([]byte, size))
		rec.ProtoReflect().SetUnknown(b)
	} else {
		p.MountPoint = "/" + strings.Repeat("x", size)
	}
	return rec
}
