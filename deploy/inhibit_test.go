//go:build linux

package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAlertmanagerInhibitions runs the real Alertmanager with the example
// configuration (amtool cannot test inhibit rules), posts alerts and reads
// back which ones it holds back: a volume's latency and probe alerts while
// an md array under that volume rebuilds, has a failed member or is not
// running, and the array's degraded alert while its member's alert pages;
// a rebuild's stall while its agent is down (its progress stands still on
// the server); not those of another volume.
func TestAlertmanagerInhibitions(t *testing.T) {
	t.Parallel()
	bin := alertmanagerBinary(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join("alertmanager", "alertmanager.yml"),
		"--storage.path="+t.TempDir(), "--web.listen-address="+addr, "--cluster.listen-address=")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("alertmanager:\n%s", logs.String())
		}
	}()
	vol := func(agent string) string { return "agent_id=" + agent + " host=" + agent + " mount_point=/data" }
	alerts := []string{
		"alertname=PlumblineRAIDRebuilding severity=warning " + vol("db01"),
		"alertname=PlumblineVolumeDegraded severity=warning kind=random-read reference=history " + vol("db01"),
		"alertname=PlumblineVolumeThrottled severity=warning kind=random-read reference=history signal=rate " + vol("db01"),
		"alertname=PlumblineRAIDMemberFailed severity=critical " + vol("db02"),
		"alertname=PlumblineVolumeCohortOutlier severity=warning kind=random-read reference=cohort " + vol("db02"),
		"alertname=PlumblineRAIDArrayDegraded severity=critical device=md0 " + vol("db02"),
		"alertname=PlumblineRAIDArrayDegraded severity=critical device=md0 " + vol("db05"),
		"alertname=PlumblineRAIDArrayNotRunning severity=critical " + vol("db03"),
		"alertname=PlumblineProbeFailing severity=warning problem=x " + vol("db03"),
		"alertname=PlumblineVolumeDegraded severity=warning kind=random-read reference=history " + vol("db04"),
		"alertname=PlumblineProbeFailing severity=warning problem=x " + vol("db04"),
		"alertname=PlumblineAgentDown severity=warning agent_id=db06 host=db06",
		"alertname=PlumblineRAIDRebuildStalled severity=critical device=md0 action=recover " + vol("db06"),
		"alertname=PlumblineRAIDRebuildStalled severity=critical device=md0 action=recover " + vol("db07"),
	}
	want := map[string]bool{ // alertname and agent: held back
		"PlumblineRAIDRebuilding db01": false, "PlumblineVolumeDegraded db01": true, "PlumblineVolumeThrottled db01": true,
		"PlumblineRAIDMemberFailed db02": false, "PlumblineVolumeCohortOutlier db02": true, "PlumblineRAIDArrayDegraded db02": true,
		"PlumblineRAIDArrayDegraded db05":   false,
		"PlumblineRAIDArrayNotRunning db03": false, "PlumblineProbeFailing db03": true,
		"PlumblineVolumeDegraded db04": false, "PlumblineProbeFailing db04": false,
		"PlumblineAgentDown db06": false, "PlumblineRAIDRebuildStalled db06": true, "PlumblineRAIDRebuildStalled db07": false,
	}
	base := "http://" + addr + "/api/v2/alerts"
	var got map[string]bool
	for ctx.Err() == nil {
		if postAlerts(ctx, base, alerts) == nil {
			if got = readInhibited(ctx, base); fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("held back %v, want %v", got, want)
}

// alertmanagerBinary finds Alertmanager under its upstream or Debian name.
func alertmanagerBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("prometheus-alertmanager"); err == nil {
		return p
	}
	return requireTool(t, "alertmanager")
}

// postAlerts posts alerts, each "name=value ...", firing for an hour.
func postAlerts(ctx context.Context, url string, alerts []string) error {
	type alert struct {
		Labels   map[string]string `json:"labels"`
		StartsAt time.Time         `json:"startsAt"`
		EndsAt   time.Time         `json:"endsAt"`
	}
	now := time.Now()
	var body []alert
	for _, a := range alerts {
		l := map[string]string{}
		for _, kv := range strings.Fields(a) {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = v
		}
		body = append(body, alert{l, now, now.Add(time.Hour)})
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("post alerts: %s", resp.Status)
	}
	return nil
}

// readInhibited maps "alertname agent_id" of each alert Alertmanager holds
// to whether an inhibit rule holds it back; nil when it cannot be read.
func readInhibited(ctx context.Context, url string) map[string]bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var alerts []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			InhibitedBy []string `json:"inhibitedBy"`
		} `json:"status"`
	}
	if json.NewDecoder(resp.Body).Decode(&alerts) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, a := range alerts {
		out[a.Labels["alertname"]+" "+a.Labels["agent_id"]] = len(a.Status.InhibitedBy) > 0
	}
	return out
}
