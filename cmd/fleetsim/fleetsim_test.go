package main

import (
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", to count rows

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestProfilesValidate: every host profile's geometry snapshot and probe
// results pass the server's validation (ingest.ValidateReport) without a
// rejection, and the profiles cover what the simulator promises.
func TestProfilesValidate(t *testing.T) {
	pool := NewSamplePool(1)
	now := time.Now()
	seen := map[string]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		h := NewHostProfile(1, i, fmt.Sprintf("host-%d", i))
		req := &plumblinev1.ReportRequest{AgentId: h.Hostname, FirstSequence: 1}
		seq := uint64(1)
		add := func(rec *plumblinev1.Record) {
			rec.Sequence = seq
			rec.ProducedAt = timestamppb.New(now)
			seq++
			req.Records = append(req.Records, rec)
		}
		inv := h.Inventory(kernelFor(h.OS), version, now)
		add(&plumblinev1.Record{Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Inventory: inv, Trigger: "start"}}})
		for vi, v := range h.Volumes {
			verdict := inv.GetVolumes()[vi].GetAlignment().GetVerdict()
			seen["verdict="+verdict] = true
			seen["media="+string(v.Media)] = true
			seen["raid="+v.RAIDLevel] = true
			seen["fs="+v.FSType] = true
			seen[fmt.Sprintf("offset=%d", v.Offset)] = true
			seen[fmt.Sprintf("stripe=%d", v.StripeUnit)] = true
			for _, k := range probe.JudgedKinds() {
				add(&plumblinev1.Record{Payload: &plumblinev1.Record_Probe{Probe: pool.ProbeRecord(r, &h.Volumes[vi], verdict == "misaligned", k, now)}})
			}
			if v.HiddenStripe {
				seen["hidden="+string(v.Media)] = true
				scan := pool.ScanRecord(r, &h.Volumes[vi], now)
				checkScanRecord(t, inv.GetVolumes()[vi], scan)
				add(&plumblinev1.Record{Payload: &plumblinev1.Record_Probe{Probe: scan}})
				skipped := pool.ScanRecord(r, &h.Volumes[vi], now)
				maintenanceSkip(skipped)
				add(&plumblinev1.Record{Payload: &plumblinev1.Record_Probe{Probe: skipped}})
			}
			// --maintenance-every's skipped runs are valid too.
			skip := pool.ProbeRecord(r, &h.Volumes[vi], verdict == "misaligned", probe.RandomRead, now)
			maintenanceSkip(skip)
			add(&plumblinev1.Record{Payload: &plumblinev1.Record_Probe{Probe: skip}})
		}
		b, err := ingest.ValidateReport(req, ingest.Limits{}, now)
		if err != nil {
			t.Fatalf("host %d: ValidateReport: %v", i, err)
		}
		for _, rj := range b.Rejections {
			t.Errorf("host %d (%+v): record %d rejected: %s", i, h, rj.GetSequence(), rj.GetReason())
		}
	}
	for _, want := range []string{
		"verdict=aligned", "verdict=misaligned", "media=hdd", "media=ssd", "media=nvme",
		"raid=raid1", "raid=raid5", "raid=raid10", "fs=ext4", "fs=xfs", "fs=ntfs",
		"offset=32256", "offset=65536", "offset=1048576", "stripe=65536", "stripe=131072", "stripe=262144",
		"hidden=hdd", "hidden=ssd", "hidden=nvme",
	} {
		if !seen[want] {
			t.Errorf("no profile with %s in 300 hosts", want)
		}
	}
}

// checkScanRecord checks a simulated stripe-scan against the volume's
// inventory: the volume shows no stripe (hardware RAID the agent cannot
// see), and the scan is placed where the real agent would place it
// (probe.PlacementFor), with the kind's whole budget.
func checkScanRecord(t *testing.T, vol *plumblinev1.Volume, pr *plumblinev1.ProbeResult) {
	t.Helper()
	if a := vol.GetAlignment(); a.GetStripeUnitBytes() != 0 {
		t.Errorf("%s: hidden stripe, but the verdict knows a %d-byte unit", vol.GetMountPoint(), a.GetStripeUnitBytes())
	}
	pl, s := probe.PlacementFor(vol), pr.GetStripeScan()
	if !pl.Known || s.GetPlacementDevice() != pl.Device || s.GetPlacementBasis() != pl.Basis || s.GetPlacementOffsetBytes() != uint64(pl.Offset) || !s.GetPlacementOffsetKnown() {
		t.Errorf("%s: scan placed on %q (%s) at %d, known %v; the agent places it at %+v", vol.GetMountPoint(),
			s.GetPlacementDevice(), s.GetPlacementBasis(), s.GetPlacementOffsetBytes(), s.GetPlacementOffsetKnown(), pl)
	}
	if pr.GetKind() != string(probe.StripeScan) || pr.GetOps() != scanOps || pr.GetLatency().GetCount() != scanOps || s.GetPlaced() != scanOps || len(s.GetCandidates()) == 0 {
		t.Errorf("%s: scan record %v", vol.GetMountPoint(), pr)
	}
}

// TestSimulatedScans: the engine's inference over the simulated reads
// answers each array's stripe unit or none, never another unit, and finds
// the unit in most scans on every medium; a mirror has none. The straddle
// cost is what the split-I/O model makes it: the slower of two member
// reads, a fraction of a read.
func TestSimulatedScans(t *testing.T) {
	pool := NewSamplePool(1)
	for _, m := range mediaKinds {
		for _, unit := range append([]uint64{0}, stripeUnits...) {
			found := 0
			for _, s := range pool.scans[scanKey{m, unit}] {
				sc := s.scan
				switch got := sc.GetInferredStripeUnitBytes(); {
				case got == unit && unit != 0:
					found++
					if c, med := sc.GetStraddleCostSeconds(), latencies[m][probe.RandomRead].median.Seconds(); c <= 0 || c > med {
						t.Errorf("%s %d: straddle cost %gs, want more than 0 and less than a read (%gs)", m, unit, c, med)
					}
					if sc.GetConfidence() < 0.99 {
						t.Errorf("%s %d: confidence %g", m, unit, sc.GetConfidence())
					}
				case got != 0:
					t.Errorf("%s, stripe unit %d: inferred %d", m, unit, got)
				}
			}
			if unit != 0 && 2*found <= scanVariants {
				t.Errorf("%s, stripe unit %d: found in %d of %d scans", m, unit, found, scanVariants)
			}
		}
	}
}

// TestHistogramPlausible: sampled latencies are ordered by medium as real
// ones are (NVMe < SSD < HDD for reads), misalignment makes them slower,
// and every histogram holds one observation per op.
func TestHistogramPlausible(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	mean := func(m Media, k probe.Kind, mis bool) time.Duration {
		h, d := SampleHistogram(r, m, k, mis, "raid5", 2000, 0)
		if h.Count() != 2000 {
			t.Fatalf("%s %s: %d observations, want 2000", m, k, h.Count())
		}
		if d < h.Sum() {
			t.Errorf("%s %s: duration %s below the sum of latencies %s at queue depth 1", m, k, d, h.Sum())
		}
		if _, err := wire.HistogramFromProto(wire.HistogramToProto(h)); err != nil {
			t.Errorf("%s %s: histogram does not survive the wire: %v", m, k, err)
		}
		return h.Mean()
	}
	nvme, ssd, hdd := mean(NVMe, probe.RandomRead, false), mean(SSD, probe.RandomRead, false), mean(HDD, probe.RandomRead, false)
	if !(nvme < ssd && ssd < hdd) {
		t.Errorf("random-read means: nvme %s, ssd %s, hdd %s; want nvme < ssd < hdd", nvme, ssd, hdd)
	}
	if hdd < 3*time.Millisecond || hdd > 30*time.Millisecond {
		t.Errorf("hdd random-read mean %s: want a few milliseconds (a seek)", hdd)
	}
	if nvme > time.Millisecond {
		t.Errorf("nvme random-read mean %s: want well under a millisecond", nvme)
	}
	if a, m := mean(SSD, probe.RandomWrite, false), mean(SSD, probe.RandomWrite, true); m <= a {
		t.Errorf("ssd raid5 random-write mean: aligned %s, misaligned %s; want misaligned slower", a, m)
	}
}

// TestEndToEnd: 20 simulated agents for 2 s against an in-process server
// over real TCP and mutual TLS, on SQLite: every record generated is
// acknowledged and stored exactly once, stripe-scans (every 10th run of
// an agent with a hidden-stripe volume) with their answer.
func TestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	ca, err := devca.Create(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	srvLeaf, err := ca.IssueServer("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "plumbline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := ingest.New(st, ingest.Options{})
	tc := &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{srvLeaf.TLSCertificate()},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(), NextProtos: []string{"h2"},
	}
	gs, _, err := ingest.NewGRPCServer(svc, tc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()

	cfg := Config{
		Agents: 20, Duration: 2 * time.Second, Rate: 400, ReportInterval: 200 * time.Millisecond, ScanEvery: 10,
		ConnectConcurrency: 8, ConnectTimeout: 30 * time.Second, Drain: 30 * time.Second,
		BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second, IDPrefix: "e2e-", Seed: 7,
	}
	target := Target{Address: ln.Addr().String(), ServerName: "127.0.0.1", Roots: ca.Pool()}
	issue := caIssuer(ca)
	sum, err := Run(ctx, cfg, target, issue, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sum.Print(&out)
	t.Log("\n" + out.String())
	if sum.Connected != 20 || sum.Errors != 0 || sum.Rejected != 0 || sum.Pending != 0 {
		t.Errorf("connected %d, errors %d, rejected %d, pending %d; want 20, 0, 0, 0", sum.Connected, sum.Errors, sum.Rejected, sum.Pending)
	}
	// One geometry snapshot per agent, then probe records at up to 400/s
	// for 2 s (about 820 on an idle machine; how many a loaded one
	// generates is the bench's figure, make bench-fleet, not this test's):
	// every one acknowledged.
	if sum.Generated <= 20 || sum.Acked != sum.Generated {
		t.Errorf("generated %d, acked %d; want probe records beyond the 20 snapshots, all acknowledged", sum.Generated, sum.Acked)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "records_per_second=") || !strings.Contains(last, "errors=0") {
		t.Errorf("last line %q: want records_per_second=N ... errors=0", last)
	}

	hosts, err := st.ListHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var hw uint64
	for _, h := range hosts {
		hw += h.HighWater
		if h.OS == "" || h.Kernel == "" {
			t.Errorf("host %s: os %q kernel %q: Hello named no host", h.ID, h.OS, h.Kernel)
		}
	}
	if len(hosts) != 20 || hw != uint64(sum.Generated) {
		t.Errorf("%d hosts with high-water marks adding up to %d; want 20 and %d (every record stored, none twice)", len(hosts), hw, sum.Generated)
	}
	vols, err := st.ListVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vols) < 20 {
		t.Errorf("%d volumes stored, want at least one per agent", len(vols))
	}
	// The records table holds each (agent, sequence) once: its row count
	// equals the sum of the high-water marks (sequences are contiguous).
	n := countRows(t, dir, "SELECT COUNT(*) FROM records")
	if n != int(hw) {
		t.Errorf("records stored %d, want %d (exactly once each)", n, hw)
	}
	// The hidden-stripe volumes' stripe-scans are stored with their answer.
	scans := countRows(t, dir, "SELECT COUNT(*) FROM probe_results WHERE kind = 'stripe-scan' AND stripe_scan IS NOT NULL")
	if sum.Scans == 0 || scans != int(sum.Scans) {
		t.Errorf("stripe-scan results: generated %d, stored with an answer %d; want some, all stored", sum.Scans, scans)
	}
}

// countRows runs a COUNT query on the store.
func countRows(t *testing.T, dir, query string) int {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "plumbline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
