package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server"
	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// envRunServer makes the test binary run the server's main instead of the
// tests: the kill test starts the real server as a child process.
const envRunServer = "PLUMBLINE_TEST_RUN_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(envRunServer) == "1" {
		main()
	}
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// inProcess runs the server in this process until the test ends and
// returns its addresses.
type inProcess struct {
	grpcAddr, webAddr string
	stdout            *syncBuffer
	cancel            context.CancelFunc
	done              chan int
	once              sync.Once
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startInProcess(t *testing.T, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{stdout: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	stderr := &syncBuffer{}
	ready := make(chan struct{})
	go func() {
		p.done <- runContext(ctx, args, p.stdout, stderr, func(g, w string) {
			p.grpcAddr, p.webAddr = g, w
			close(ready)
		})
	}()
	select {
	case <-ready:
	case code := <-p.done:
		t.Fatalf("server exited with %d before serving:\n%s\n%s", code, p.stdout, stderr)
	case <-time.After(60 * time.Second):
		t.Fatal("server did not start in 60s")
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *inProcess) stop(t *testing.T) {
	p.once.Do(func() {
		p.cancel()
		select {
		case code := <-p.done:
			if code != 0 {
				t.Errorf("server exited with %d, want 0 after a graceful stop", code)
			}
		case <-time.After(30 * time.Second):
			t.Error("server did not stop in 30s")
		}
	})
}

// devAgent is what DIR/dev/agent.yaml tells an agent.
type devAgent struct {
	AgentID string `yaml:"agent_id"`
	Server  struct {
		Address string `yaml:"address"`
		TLS     struct {
			CAFile     string `yaml:"ca_file"`
			CertFile   string `yaml:"cert_file"`
			KeyFile    string `yaml:"key_file"`
			ServerName string `yaml:"server_name"`
		} `yaml:"tls"`
		Insecure bool `yaml:"insecure"`
	} `yaml:"server"`
	Spool struct {
		Dir      string `yaml:"dir"`
		MaxBytes string `yaml:"max_bytes"`
	} `yaml:"spool"`
	Intervals struct {
		GeometryRefresh string `yaml:"geometry_refresh"`
		Report          string `yaml:"report"`
	} `yaml:"intervals"`
	Probes []struct {
		MountPoint  string   `yaml:"mount_point"`
		Dir         string   `yaml:"dir"`
		Kinds       []string `yaml:"kinds"`
		Every       string   `yaml:"every"`
		Ops         int      `yaml:"ops"`
		IOPS        int      `yaml:"iops"`
		MaxDuration string   `yaml:"max_duration"`
		FileSize    string   `yaml:"file_size"`
		AllowCached bool     `yaml:"allow_cached"`
	} `yaml:"probes"`
	Web struct {
		ListenAddress string `yaml:"listen_address"`
	} `yaml:"web"`
	OverrideFiles []string `yaml:"override_files"`
}

func readDevAgent(t *testing.T, path string) devAgent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var a devAgent
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true) // every key written is one the agent's loader knows (as listed in the issue)
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return a
}

// dialAsDevAgent connects the way an agent with DIR/dev/agent.yaml does.
func dialAsDevAgent(t *testing.T, a devAgent) plumblinev1.AgentServiceClient {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(a.Server.TLS.CertFile, a.Server.TLS.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(a.Server.TLS.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	conf := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, ServerName: a.Server.TLS.ServerName, MinVersion: tls.VersionTLS13}
	cc, err := grpc.NewClient(a.Server.Address, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return plumblinev1.NewAgentServiceClient(cc)
}

func u64(v uint64) *uint64 { return &v }

func misaligned(mp string) *plumblinev1.Volume {
	return &plumblinev1.Volume{
		MountPoint: mp, Device: "/dev/sdb1",
		Filesystem: &plumblinev1.Filesystem{Type: "ntfs", BlockSizeBytes: 65536},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/sdb1", FsType: "ntfs", BlockSizeBytes: 65536, OffsetBytes: u64(0)},
			{Kind: "partition", Device: "sdb1", OffsetBytes: u64(32256), LogicalSectorBytes: 512},
			{Kind: "raid", Device: "sdb", RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2,
				LogicalSectorBytes: 512, PhysicalSectorBytes: 512, OffsetBytes: u64(0), Source: "declared"},
		},
		Alignment: &plumblinev1.Alignment{Verdict: "aligned"}, // the agent's claim; the server judges again
	}
}

func probeRecords(from, to uint64) []*plumblinev1.Record {
	h := &histogram.Histogram{}
	for range 10 {
		h.Observe(200 * time.Microsecond)
	}
	var out []*plumblinev1.Record
	for s := from; s <= to; s++ {
		out = append(out, &plumblinev1.Record{Sequence: s, ProducedAt: timestamppb.Now(), Payload: &plumblinev1.Record_Probe{Probe: &plumblinev1.ProbeResult{
			MountPoint: "/data", Device: "sdb", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 1, Ops: 10, Bytes: 81920,
			Duration: durationpb.New(time.Second), StartedAt: timestamppb.Now(), Latency: wire.HistogramToProto(h),
		}}})
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, b)
	}
}

// TestDevEndToEnd: `server --dev --data-dir DIR` creates DIR, the CA, the
// certificates and DIR/dev/agent.yaml, and serves; an agent using exactly
// that config reports a misaligned volume (claiming it aligned), and
// /api/v1/volumes shows the server's verdict. Against SQLite (the dev
// default) and PostgreSQL (--store.dsn).
func TestDevEndToEnd(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "plumbline-dev") // does not exist yet
			args := []string{"--dev", "--data-dir", dir, "--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0", "--log.level", "debug"}
			if engine == "postgres" {
				args = append(args, "--store.dsn", pgtest.DSN(t))
			}
			srv := startInProcess(t, args...)
			for _, want := range []string{"gRPC:", srv.grpcAddr, "HTTP:", srv.webAddr, filepath.Join(dir, "dev", "agent.yaml")} {
				if !strings.Contains(srv.stdout.String(), want) {
					t.Errorf("dev banner does not show %q:\n%s", want, srv.stdout)
				}
			}
			for _, f := range []string{"ca/ca.crt", "ca/ca.key", "tls/server.crt", "tls/server.key", "dev/ca.crt", "dev/agent.crt", "dev/agent.key", "dev/agent.yaml"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("dev mode did not create %s: %v", f, err)
				}
			}
			if engine == "sqlite" {
				if _, err := os.Stat(filepath.Join(dir, "plumbline.db")); err != nil {
					t.Errorf("no SQLite database under DIR: %v", err)
				}
			}
			a := checkDevAgentFile(t, dir, srv.grpcAddr)
			host := server.DevAgentID()

			c := dialAsDevAgent(t, a)
			if _, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: host, Host: &plumblinev1.Host{Hostname: host, Os: "linux"}, AgentVersion: "test"}); err != nil {
				t.Fatalf("Hello with the dev agent config: %v", err)
			}
			recs := append([]*plumblinev1.Record{{Sequence: 1, ProducedAt: timestamppb.Now(), Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{
				Trigger: "start", Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: host, Os: "linux"}, Volumes: []*plumblinev1.Volume{misaligned("/mssql/data")}}}}}},
				probeRecords(2, 3)...)
			rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: host, Records: recs})
			if err != nil || rep.GetHighWaterSequence() != 3 {
				t.Fatalf("Report = %v, %v; want high water 3", rep, err)
			}
			checkDevVolume(t, srv.webAddr, host)
		})
	}
}

// checkDevAgentFile checks DIR/dev/agent.yaml as written and as the
// agent's own loader takes it, and returns it as written.
func checkDevAgentFile(t *testing.T, dir, grpcAddr string) devAgent {
	t.Helper()
	a := readDevAgent(t, filepath.Join(dir, "dev", "agent.yaml"))
	// The agent's own loader takes it as it is.
	eff, err := config.LoadRun(filepath.Join(dir, "dev", "agent.yaml"))
	if err != nil {
		t.Errorf("config.LoadRun(DIR/dev/agent.yaml): %v", err)
	}
	host := server.DevAgentID()
	checks := []struct {
		name      string
		got, want any
	}{
		{"agent_id", a.AgentID, host},
		{"server.address", a.Server.Address, grpcAddr},
		{"server.tls.ca_file", a.Server.TLS.CAFile, filepath.Join(dir, "dev", "ca.crt")},
		{"server.tls.cert_file", a.Server.TLS.CertFile, filepath.Join(dir, "dev", "agent.crt")},
		{"server.tls.key_file", a.Server.TLS.KeyFile, filepath.Join(dir, "dev", "agent.key")},
		{"server.tls.server_name", a.Server.TLS.ServerName, "localhost"},
		{"server.insecure", a.Server.Insecure, false},
		{"spool.dir", a.Spool.Dir, filepath.Join(dir, "dev", "spool")},
		// Left to the agent's defaults.
		{"spool.max_bytes", eff.Spool.MaxBytes, config.DefaultSpoolMaxBytes},
		{"intervals.report", eff.Intervals.Report, config.DefaultReportInterval},
		{"intervals.geometry_refresh", eff.Intervals.GeometryRefresh, config.DefaultGeometryRefresh},
		{"probes", len(a.Probes), 1},
		{"override_files", strings.Join(a.OverrideFiles, ","), "agent.local.yaml"},
	}
	// The agent's web port: the one after the server's when free,
	// else another free loopback port; never a fixed one.
	if h, port, err := net.SplitHostPort(a.Web.ListenAddress); err != nil || h != "127.0.0.1" || port == "0" {
		t.Errorf("agent.yaml web.listen_address = %q, want 127.0.0.1 and a port", a.Web.ListenAddress)
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("agent.yaml %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if len(a.Probes) == 1 {
		p := a.Probes[0]
		if p.Dir != filepath.Join(dir, "dev", "probe") || !strings.HasPrefix(p.MountPoint, "/") || len(p.Kinds) != 3 || !p.AllowCached || p.Ops == 0 {
			t.Errorf("agent.yaml probes[0] = %+v", p)
		}
		if fi, err := os.Stat(p.Dir); err != nil || !fi.IsDir() {
			t.Errorf("probe dir %s: %v", p.Dir, err)
		}
	}
	return a
}

// checkDevVolume checks the dev agent's one reported volume through the
// API, judged by the server.
func checkDevVolume(t *testing.T, webAddr, host string) {
	t.Helper()
	var vols struct {
		Volumes []struct {
			Host       string `json:"host"`
			MountPoint string `json:"mount_point"`
			Filesystem struct {
				Type string `json:"type"`
			} `json:"filesystem"`
			Layers    []map[string]any `json:"layers"`
			Alignment struct {
				Verdict         string             `json:"verdict"`
				DataOffsetBytes uint64             `json:"data_offset_bytes"`
				SplitFraction   map[string]float64 `json:"split_fraction"`
				Findings        []map[string]any   `json:"findings"`
			} `json:"alignment"`
		} `json:"volumes"`
	}
	getJSON(t, "http://"+webAddr+"/api/v1/volumes", &vols)
	if len(vols.Volumes) != 1 {
		t.Fatalf("/api/v1/volumes: %+v", vols)
	}
	v := vols.Volumes[0]
	if v.Host != host || v.MountPoint != "/mssql/data" || v.Filesystem.Type != "ntfs" || len(v.Layers) != 3 ||
		v.Alignment.Verdict != "misaligned" || v.Alignment.DataOffsetBytes != 32256 || v.Alignment.SplitFraction["8192"] != 0.125 || len(v.Alignment.Findings) == 0 {
		t.Errorf("/api/v1/volumes[0] = %+v; want the server's misaligned verdict (32256, 12.5%% of 8 KiB I/Os split)", v)
	}
	var hosts struct {
		Hosts []map[string]any `json:"hosts"`
	}
	getJSON(t, "http://"+webAddr+"/api/v1/hosts", &hosts)
	if len(hosts.Hosts) != 1 || hosts.Hosts[0]["agent_id"] != host {
		t.Errorf("/api/v1/hosts = %v", hosts)
	}
	var ready map[string]string
	getJSON(t, "http://"+webAddr+"/readyz", &ready)
}

// TestDevRestartReusesCA: a second start on the same DIR keeps the CA and
// the agent certificate (agents already configured keep working).
func TestDevRestartReusesCA(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--dev", "--data-dir", dir, "--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0"}
	first := startInProcess(t, args...)
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca, agentCert, serverCert := read("ca/ca.crt"), read("dev/agent.crt"), read("tls/server.crt")
	first.stop(t)
	second := startInProcess(t, args...)
	if !bytes.Equal(ca, read("ca/ca.crt")) || !bytes.Equal(agentCert, read("dev/agent.crt")) || !bytes.Equal(serverCert, read("tls/server.crt")) {
		t.Error("restart replaced the CA or the certificates")
	}
	a := readDevAgent(t, filepath.Join(dir, "dev", "agent.yaml"))
	if a.Server.Address != second.grpcAddr {
		t.Errorf("agent.yaml address %s after restart, server on %s", a.Server.Address, second.grpcAddr)
	}
	c := dialAsDevAgent(t, a)
	if _, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: a.AgentID}); err != nil {
		t.Fatalf("Hello after restart: %v", err)
	}
	// The fleet simulator's path: load the CA, mint another agent.
	dca, err := devca.Load(filepath.Join(dir, "dev", server.DevCADir))
	if err != nil {
		t.Fatalf("devca.Load(DIR/dev/%s): %v", server.DevCADir, err)
	}
	if _, err := dca.IssueAgent("sim-0001"); err != nil {
		t.Fatal(err)
	}
}

// TestKillMidBatch: the server process is SIGKILLed while an agent is
// sending batches back to back; after a restart on the same SQLite file
// every acknowledged record is there, and Hello's high-water mark covers
// them.
func TestKillMidBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server as a child process")
	}
	dir := t.TempDir()
	cmd := startDevChild(t, dir)
	a := readDevAgent(t, filepath.Join(dir, "dev", "agent.yaml"))
	c := dialAsDevAgent(t, a)
	if _, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: a.AgentID}); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked uint64
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		next := uint64(1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rep, err := c.Report(ctx, &plumblinev1.ReportRequest{AgentId: a.AgentID, Records: probeRecords(next, next+49)})
			cancel()
			if err != nil {
				return // the server is gone
			}
			mu.Lock()
			acked = rep.GetHighWaterSequence()
			mu.Unlock()
			next += 50
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := acked
		mu.Unlock()
		if n >= 500 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill() // SIGKILL, with a batch most likely in flight
	cmd.Wait()
	close(stop)
	<-done
	mu.Lock()
	lastAcked := acked
	mu.Unlock()
	if lastAcked == 0 {
		t.Fatal("no batch was acknowledged before the kill")
	}

	startDevChild(t, dir) // same DIR, same SQLite file
	checkAfterKill(t, dir, lastAcked)
}

// startDevChild starts `server --dev` on dir as a child process and
// waits for its gRPC listener.
func startDevChild(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "--dev", "--data-dir", dir, "--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), envRunServer+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "gRPC:") {
			go io.Copy(io.Discard, out)
			return cmd
		}
	}
	t.Fatal("server printed no gRPC address")
	return nil
}

// checkAfterKill: the restarted dev server on dir has every record
// acknowledged before the kill (lastAcked), and takes the resent tail.
func checkAfterKill(t *testing.T, dir string, lastAcked uint64) {
	t.Helper()
	a := readDevAgent(t, filepath.Join(dir, "dev", "agent.yaml"))
	c := dialAsDevAgent(t, a)
	h, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: a.AgentID})
	if err != nil {
		t.Fatal(err)
	}
	if h.GetHighWaterSequence() < lastAcked {
		t.Fatalf("after the kill: high water %d, but %d was acknowledged", h.GetHighWaterSequence(), lastAcked)
	}
	t.Logf("acknowledged before SIGKILL: %d; high water after restart: %d (the difference: committed, ack lost)", lastAcked, h.GetHighWaterSequence())
	st, err := store.Open(ctxT(t), "sqlite://"+filepath.Join(dir, "plumbline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if hw, err := st.HighWater(ctxT(t), a.AgentID, ""); err != nil || hw != h.GetHighWaterSequence() {
		t.Errorf("store high water %d, %v; Hello said %d", hw, err, h.GetHighWaterSequence())
	}
	// The resent tail is acknowledged exactly once more.
	rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: a.AgentID, Records: probeRecords(lastAcked-9, lastAcked+10)})
	if err != nil || rep.GetHighWaterSequence() < lastAcked+10 {
		t.Errorf("resending around the kill point: %v, %v", rep, err)
	}
}

// TestDevAgentConfigSideBySide: two dev servers at once give their agents
// different free /metrics ports (not a fixed 9465 whose second bind
// fails), and a developer's agent.local.yaml survives restarts and is
// part of the agent's configuration.
func TestDevAgentConfigSideBySide(t *testing.T) {
	args := func(dir string) []string {
		return []string{"--dev", "--data-dir", dir, "--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0"}
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	startInProcess(t, args(dirA)...)
	b := startInProcess(t, args(dirB)...)
	webA := readDevAgent(t, filepath.Join(dirA, "dev", "agent.yaml")).Web.ListenAddress
	webB := readDevAgent(t, filepath.Join(dirB, "dev", "agent.yaml")).Web.ListenAddress
	if webA == "" || webB == "" || webA == webB {
		t.Fatalf("agent web addresses %q and %q: want two different ones", webA, webB)
	}
	// The agent of A binds its port; B's is still free for B's agent.
	la, err := net.Listen("tcp", webA)
	if err != nil {
		t.Fatalf("agent A cannot bind %s: %v", webA, err)
	}
	defer la.Close()
	lb, err := net.Listen("tcp", webB)
	if err != nil {
		t.Fatalf("agent B cannot bind %s while agent A holds %s: %v", webB, webA, err)
	}
	lb.Close()

	// A developer declares RAID in agent.local.yaml; a restart keeps it.
	local := filepath.Join(dirB, "dev", "agent.local.yaml")
	mine := "declared_devices:\n  - device: /dev/sdb\n    raid: {level: raid10, stripe_unit: 64k, disks: 4}\n"
	if err := os.WriteFile(local, []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	b.stop(t)
	startInProcess(t, args(dirB)...)
	if got, _ := os.ReadFile(local); string(got) != mine {
		t.Errorf("agent.local.yaml after a restart:\n%s\nwant the developer's:\n%s", got, mine)
	}
	cfg, err := config.LoadRun(filepath.Join(dirB, "dev", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.DeclaredDevices) != 1 || cfg.DeclaredDevices[0].RAID.Level != "raid10" || len(cfg.Probes) != 1 {
		t.Errorf("agent config = declared %+v, probes %d; want agent.local.yaml's raid10 and agent.yaml's probe", cfg.DeclaredDevices, len(cfg.Probes))
	}
}
