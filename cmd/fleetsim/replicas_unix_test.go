//go:build unix

package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/server/leader"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// leaseTTL is the replicas' store.lease_ttl in TestReplicas.
const leaseTTL = 2 * time.Second

// grace is what the failover bounds allow for polling, scheduling and
// the store's latency on a shared machine (load averages of 25 on its two
// cores were seen): one lease TTL.
const grace = leaseTTL

// replicaProc is one `server` process.
type replicaProc struct {
	name      string
	cmd       *exec.Cmd
	grpc, web string
	log       string // its stderr
	exited    chan struct{}
}

// startReplica starts the server binary on config and waits for the line
// that names its bound addresses.
func startReplica(t *testing.T, bin, name, config string) *replicaProc {
	t.Helper()
	logPath := filepath.Join(filepath.Dir(config), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd := exec.Command(bin, "--config", config, "--baseline.interval", "300ms", "--log.level", "info")
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replicaProc{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-r.exited
	})
	addrs := regexp.MustCompile(`^plumbline server: gRPC (\S+), HTTP (\S+)$`)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	select {
	case line, ok := <-lines:
		m := addrs.FindStringSubmatch(line)
		if !ok || m == nil {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s: first line %q; log:\n%s", name, line, b)
		}
		r.grpc, r.web = m[1], m[2]
	case <-time.After(time.Minute):
		t.Fatalf("%s did not start", name)
	}
	go func() {
		for range lines {
		}
	}()
	return r
}

var leaderLine = regexp.MustCompile(`(?m)^plumbline_server_leader\{loop="(\w+)"\} (\d)`)

// leads is what the replica's /metrics says it leads (nil: unreachable).
func (r *replicaProc) leads() map[string]bool {
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get("http://" + r.web + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]bool{}
	for _, m := range leaderLine.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2] == "1"
	}
	return out
}

// waitLeaders polls the replicas until each loop has a leader among
// them, and returns the leaders and when the last was seen. The loops are
// elected apart: one replica may lead both, or each another.
func waitLeaders(t *testing.T, rs []*replicaProc, bound time.Duration) (map[string]*replicaProc, time.Time) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		got := map[string]*replicaProc{}
		for _, r := range rs {
			for loop, leads := range r.leads() {
				if leads {
					got[loop] = r
				}
			}
		}
		if got["evaluator"] != nil && got["inventory"] != nil {
			return got, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not every loop has a leader among %d replicas within %v", len(rs), bound)
	return nil, time.Time{}
}

// writeReplicaConfig writes the configuration of one replica: mutual TLS
// with the test CA, loopback listeners on free ports, the shared store.
func writeReplicaConfig(t *testing.T, dir, name, dsn string, pki map[string]string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o750); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`data_dir: %s
grpc:
  listen_address: 127.0.0.1:0
  tls: {cert_file: %s, key_file: %s, client_ca_file: %s}
  rate_limit: {calls_per_second: 0}
web:
  listen_address: 127.0.0.1:0
store:
  dsn: %q
  lease_ttl: %s
agents:
  report_interval: 1s
shutdown_timeout: 5s
`, d, pki["cert"], pki["key"], pki["ca"], dsn, leaseTTL)
	p := filepath.Join(d, "server.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReplicas: three server processes on one PostgreSQL, a simulated
// fleet spread over them. The leader of the background loops is killed
// with SIGKILL mid-run: another replica leads within the bound the lease
// TTL sets. That one is then frozen with SIGSTOP: the third leads, and the
// frozen one, continued, stands down (its writes are fenced). Every agent
// reconnects to a surviving replica; every record is stored exactly once;
// every probe run is judged exactly once (the evaluator's counts per
// volume and kind equal the stored runs).
func TestReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	rs, ca := startReplicas(t, dsn)
	defer func() {
		if t.Failed() {
			for _, r := range rs {
				b, _ := os.ReadFile(r.log)
				t.Logf("%s log (tail):\n%s", r.name, tail(string(b), 30))
			}
		}
	}()
	bound := leader.FailoverBound(leaseTTL)
	leaders, _ := waitLeaders(t, rs, 2*bound+grace)
	first := leaders["evaluator"]

	// The fleet, spread over the three.
	cfg := Config{
		Agents: 30, Duration: 16 * time.Second, Rate: 300, ReportInterval: 200 * time.Millisecond,
		ConnectConcurrency: 8, ConnectTimeout: 30 * time.Second, Drain: 90 * time.Second,
		BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second, IDPrefix: "replica-", Seed: 11,
	}
	target := Target{Addresses: []string{rs[0].grpc, rs[1].grpc, rs[2].grpc}, ServerName: "127.0.0.1", Roots: ca.Pool()}
	issue := caIssuer(ca)
	type result struct {
		sum Summary
		err error
	}
	size0 := dbSize(t, dsn)
	done := make(chan result, 1)
	go func() {
		sum, err := Run(context.Background(), cfg, target, issue, io.Discard)
		done <- result{sum, err}
	}()

	waitServed(t, dsn, cfg.Agents, cfg.ConnectTimeout) // mid-run
	failLeaders(t, rs, first)

	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	sum := res.sum
	var out strings.Builder
	sum.Print(&out)
	t.Log("\n" + out.String())
	if sum.Connected != cfg.Agents || sum.Pending != 0 || sum.Rejected != 0 || sum.Acked != sum.Generated {
		t.Errorf("connected %d, pending %d, rejected %d, acked %d of %d; want every agent, every record acknowledged", sum.Connected, sum.Pending, sum.Rejected, sum.Acked, sum.Generated)
	}
	// The killed replica served agents, and each of them was then
	// served by a survivor (every record acknowledged, and the killed one
	// never came back).
	if n := sum.ServedBy[first.grpc]; n == 0 || sum.Moved < n {
		t.Errorf("agents served by the killed replica: %d, agents served by more than one replica: %d; want some, and each of them moved", n, sum.Moved)
	}
	checkStoredOnce(t, dsn, sum.Generated, cfg.Agents)
	checkJudgedOnce(t, dsn)
	// What a stored record costs PostgreSQL (the records, the probe
	// results, their indexes, the baselines and the inventory), for the
	// README's sizing.
	if grew := dbSize(t, dsn) - size0; sum.Generated > 0 {
		t.Logf("PostgreSQL grew %.1f MiB for %d records: %.0f bytes per record", float64(grew)/(1<<20), sum.Generated, float64(grew)/float64(sum.Generated))
	}
}

// waitServed waits (at most limit) until every one of the fleet's agents
// has records stored: the fleet is sending, and each replica has served
// the agents that start on it.
func waitServed(t *testing.T, dsn string, agents int, limit time.Duration) {
	t.Helper()
	db := openPG(t, dsn)
	deadline := time.Now().Add(limit)
	for {
		var n int
		if err := db.QueryRow(`SELECT count(DISTINCT agent_id) FROM records`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == agents {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d agents have records stored %v into the run", n, agents, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dbSize is the size of the test's database in bytes.
func dbSize(t *testing.T, dsn string) int64 {
	t.Helper()
	var n int64
	if err := openPG(t, dsn).QueryRow(`SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// startReplicas builds the server once, makes a CA and a server
// certificate and starts three replicas on dsn.
func startReplicas(t *testing.T, dsn string) ([]*replicaProc, *devca.CA) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/plumbline/plumbline/cmd/server").CombinedOutput(); err != nil {
		t.Fatalf("go build server: %v\n%s", err, out)
	}
	ca, err := devca.Create(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServer("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pki := map[string]string{"cert": filepath.Join(dir, "server.crt"), "key": filepath.Join(dir, "server.key"), "ca": ca.CertPath()}
	if err := leaf.WriteFiles(pki["cert"], pki["key"]); err != nil {
		t.Fatal(err)
	}
	var rs []*replicaProc
	for i := range 3 {
		name := fmt.Sprintf("replica%d", i+1)
		rs = append(rs, startReplica(t, bin, name, writeReplicaConfig(t, dir, name, dsn, pki)))
	}
	return rs, ca
}

// failLeaders kills first, the evaluator's leader, with SIGKILL, then
// freezes the next leader with SIGSTOP: each time another replica must
// lead within the bound the lease TTL sets, and the frozen one, continued,
// must stand down.
func failLeaders(t *testing.T, rs []*replicaProc, first *replicaProc) {
	t.Helper()
	bound := leader.FailoverBound(leaseTTL)
	killed := time.Now()
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	alive := others(rs, first)
	leaders, seen := waitLeaders(t, alive, bound+grace)
	second := leaders["evaluator"]
	t.Logf("SIGKILL of %s: %s leads the evaluator, %s the inventory, %v later (bound %v from the lease TTL %v)",
		first.name, second.name, leaders["inventory"].name, seen.Sub(killed).Round(time.Millisecond), bound, leaseTTL)

	// SIGSTOP the new leader: the third leads; continued, it stands down.
	stopped := time.Now()
	second.cmd.Process.Signal(syscall.SIGSTOP)
	last := others(alive, second)
	leaders, seen = waitLeaders(t, last, bound+max(leaseTTL/3, time.Second)+grace)
	t.Logf("SIGSTOP of %s: %s leads both loops %v later", second.name, last[0].name, seen.Sub(stopped).Round(time.Millisecond))
	// Frozen on past its successor's start, as a stopped process stays
	// stopped: the time it misses is the point.
	time.Sleep(time.Second)
	second.cmd.Process.Signal(syscall.SIGCONT)
	deadline := time.Now().Add(leaseTTL + grace)
	for l := second.leads(); l == nil || l["evaluator"] || l["inventory"]; l = second.leads() {
		if time.Now().After(deadline) {
			t.Fatalf("%s, continued, still says it leads %v one TTL later", second.name, l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b, err := os.ReadFile(second.log); err == nil {
		t.Logf("%s after SIGCONT:\n%s", second.name, grepLines(string(b), "component=leader"))
	}

}

// checkStoredOnce: the records table holds each (agent, sequence) once
// and the agents' high-water marks add up to what the fleet generated.
func checkStoredOnce(t *testing.T, dsn string, generated int64, agents int) {
	t.Helper()
	db := openPG(t, dsn)
	var n, distinct, hw, hosts int64
	if err := db.QueryRow(`SELECT count(*), count(DISTINCT (agent_id, sequence)) FROM records`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*), COALESCE(sum(high_water), 0) FROM agents`).Scan(&hosts, &hw); err != nil {
		t.Fatal(err)
	}
	if n != distinct || n != hw || hw != generated || hosts != int64(agents) {
		t.Errorf("records %d (%d distinct), high-water marks add up to %d over %d agents; want %d each, %d agents", n, distinct, hw, hosts, generated, agents)
	}
	t.Logf("%d records stored exactly once by %d agents", n, hosts)
}

// checkJudgedOnce waits for the evaluator to reach every agent's
// high-water mark, then checks every probe run was judged exactly once:
// per volume and kind, the evaluator's run count (baseline_states.runs,
// carried in its detectors from leader to leader) equals the stored runs
// that did I/O, and its stop counts (added per pass) equal the stored
// runs skipped or stopped. A run judged twice (two leaders, or a stale
// one) shows as more; one never judged, or a leader that wrote back stale
// detectors, as fewer.
func checkJudgedOnce(t *testing.T, dsn string) {
	t.Helper()
	db := openPG(t, dsn)
	deadline := time.Now().Add(time.Minute)
	for {
		var behind int
		if err := db.QueryRow(`SELECT count(*) FROM agents a LEFT JOIN baseline_watermarks w ON w.agent_id = a.agent_id
WHERE COALESCE(w.evaluated_through, 0) < a.high_water`).Scan(&behind); err != nil {
			t.Fatal(err)
		}
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d agents' probe runs still not judged a minute after the run", behind)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var keys, judged, stops int64
	rows, err := db.Query(`
WITH stored AS (
    SELECT agent_id, mount_point, kind,
        sum(CASE WHEN NOT skipped AND ops > 0 THEN 1 ELSE 0 END) AS did_io,
        sum(CASE WHEN skipped OR stopped_reason <> '' THEN 1 ELSE 0 END) AS stopped
    FROM probe_results GROUP BY agent_id, mount_point, kind),
stop_counts AS (
    SELECT agent_id, mount_point, kind, sum(runs) AS runs FROM probe_stop_counts GROUP BY agent_id, mount_point, kind)
SELECT s.agent_id, s.mount_point, s.kind, s.did_io, COALESCE(b.runs, 0), s.stopped, COALESCE(c.runs, 0)
FROM stored s
LEFT JOIN baseline_states b USING (agent_id, mount_point, kind)
LEFT JOIN stop_counts c USING (agent_id, mount_point, kind)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var agent, mount, kind string
		var didIO, runs, stopped, counted int64
		if err := rows.Scan(&agent, &mount, &kind, &didIO, &runs, &stopped, &counted); err != nil {
			t.Fatal(err)
		}
		keys++
		judged += runs
		stops += counted
		if runs != didIO || counted != stopped {
			t.Errorf("%s %s %s: judged %d of %d runs with I/O, counted %d of %d stopped runs; want each exactly once", agent, mount, kind, runs, didIO, counted, stopped)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if keys == 0 || judged == 0 {
		t.Fatalf("%d volume kinds, %d runs judged: the run produced nothing to judge", keys, judged)
	}
	t.Logf("evaluator: %d probe runs judged, %d stopped runs counted, over %d volume kinds", judged, stops, keys)
}

func openPG(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func others(rs []*replicaProc, not *replicaProc) []*replicaProc {
	var out []*replicaProc
	for _, r := range rs {
		if r != not {
			out = append(out, r)
		}
	}
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// grepLines are the lines of s that hold substr.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
