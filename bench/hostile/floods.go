package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/plumbline/plumbline/internal/agent/config"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// floodCall is one call of a flood on its connection.
type floodCall func(ctx context.Context, cc *grpc.ClientConn) error

// floods are the method floods (--mode), each fired without a client
// certificate unless it says otherwise.
func floods(size int) map[string]floodCall {
	blob := make([]byte, size)
	text := strings.Repeat("x", size)
	return map[string]floodCall{
		"anon-renew": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := plumblinev1.NewEnrollmentServiceClient(cc).Renew(ctx, &plumblinev1.RenewRequest{CsrDer: blob})
			return err
		},
		"anon-check": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: text})
			return err
		},
		"anon-enroll": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := plumblinev1.NewEnrollmentServiceClient(cc).Enroll(ctx, &plumblinev1.EnrollRequest{Token: text})
			return err
		},
		"anon-bundle": func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := plumblinev1.NewEnrollmentServiceClient(cc).GetTrustBundle(ctx, &plumblinev1.GetTrustBundleRequest{})
			return err
		},
	}
}

// runFlood fires rounds rounds of calls concurrent calls of mode over
// conns connections without a client certificate, and prints the status
// codes of each round.
func runFlood(devDir, mode string, size, calls, rounds, conns int) error {
	call, ok := floods(size)[mode]
	if !ok {
		return fmt.Errorf("--mode %q: want reports, watch or one of %s", mode, strings.Join(floodNames(size), ", "))
	}
	addr, tc, err := anonTLS(devDir)
	if err != nil {
		return err
	}
	var ccs []*grpc.ClientConn
	defer func() {
		for _, cc := range ccs {
			cc.Close()
		}
	}()
	for range conns {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)), grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
		if err != nil {
			return err
		}
		ccs = append(ccs, cc)
	}
	fmt.Printf("%s: %d rounds of %d concurrent calls of %.2f MiB over %d connection(s), no client certificate\n", mode, rounds, calls, float64(size)/(1<<20), conns)
	for r := range rounds {
		start := time.Now()
		codes := fire(calls, func(i int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			return call(ctx, ccs[i%len(ccs)])
		})
		fmt.Printf("round %d: %s in %.1fs\n", r+1, codes, time.Since(start).Seconds())
	}
	return nil
}

func floodNames(size int) []string {
	var names []string
	for n := range floods(size) {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// fire makes n calls at once and counts them by status code.
func fire(n int, call func(i int) error) string {
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := call(i)
			mu.Lock()
			codes[status.Code(err).String()]++
			mu.Unlock()
		})
	}
	wg.Wait()
	var parts []string
	for c, k := range codes {
		parts = append(parts, fmt.Sprintf("%s=%d", c, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// runWatch opens calls concurrent WatchPolicy long-polls from the first
// client's agent, holds them for hold, and prints how many were admitted.
func runWatch(clients []client, calls int, hold time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	fmt.Printf("watch: %d concurrent WatchPolicy calls from agent %s, held %s\n", calls, clients[0].id, hold)
	codes := fire(calls, func(int) error {
		_, err := clients[0].c.WatchPolicy(ctx, &plumblinev1.WatchPolicyRequest{AgentId: clients[0].id, Wait: durationpb.New(time.Hour)})
		return err
	})
	fmt.Printf("watch: %s (DeadlineExceeded: admitted and held until the end)\n", codes)
}

// anonTLS is the server's address and a TLS configuration trusting its
// CA, without a client certificate.
func anonTLS(devDir string) (string, *tls.Config, error) {
	ac, err := config.Load(filepath.Join(devDir, "agent.yaml"))
	if err != nil {
		return "", nil, err
	}
	pem, err := os.ReadFile(filepath.Join(devDir, "ca.crt"))
	if err != nil {
		return "", nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	host, _, _ := net.SplitHostPort(ac.Server.Address)
	if ac.Server.TLS.ServerName != "" {
		host = ac.Server.TLS.ServerName
	}
	return ac.Server.Address, &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS13}, nil
}
