package server

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/vocab"
)

// The dev agent config (written without linking the agent's configuration
// package) loads through the agent's own loader with every value intact,
// whatever characters the paths hold (YAML quoting is the encoder's): a
// key renamed on either side fails here.
func TestDevAgentConfigLoads(t *testing.T) {
	for _, name := range []string{"plain", "with space: and colon", "true", "#hash [glob*]"} {
		t.Run(name, func(t *testing.T) {
			l, err := newDevLayout(filepath.Join(t.TempDir(), name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(l.probeDir, 0o700); err != nil {
				t.Fatal(err)
			}
			for _, insecure := range []bool{false, true} {
				if err := writeDevAgentConfig(l, "127.0.0.1:7443", "127.0.0.1:9465", insecure); err != nil {
					t.Fatal(err)
				}
				got, err := config.LoadRun(l.agentYAML)
				if err != nil {
					b, _ := os.ReadFile(l.agentYAML)
					t.Fatalf("LoadRun(dev agent.yaml) = %v\n%s", err, b)
				}
				if diff := cmp.Diff(wantDevAgent(l, insecure), got); diff != "" {
					t.Errorf("LoadRun(dev agent.yaml, insecure %v) (-want +got):\n%s", insecure, diff)
				}
			}
		})
	}
}

// wantDevAgent is the dev agent's configuration as the agent loads it.
func wantDevAgent(l devLayout, insecure bool) config.Agent {
	want := config.Default()
	iops := 50.0
	want.AgentID = DevAgentID()
	want.Server = config.Server{Address: "127.0.0.1:7443", Insecure: insecure,
		TLS: config.ClientTLS{CAFile: l.agentCA, CertFile: l.agentCert, KeyFile: l.agentK, ServerName: "localhost"}}
	want.Spool.Dir = l.spoolDir
	want.Probes = []config.ProbeSchedule{{
		MountPoint: globQuote(mountPointOf(l.probeDir)), Dir: l.probeDir, Kinds: vocab.DefaultProbeKinds(),
		Every: 5 * time.Minute, Ops: 200, IOPS: &iops, MaxDuration: 30 * time.Second, FileSize: 64 * bytesize.MiB, AllowCached: true,
	}}
	want.Web.ListenAddress = "127.0.0.1:9465"
	want.OverrideFiles = []string{"agent.local.yaml"}
	return config.WithDefaults(want)
}

// agent.local.yaml's commented examples are valid agent keys once
// uncommented.
func TestDevAgentLocalExample(t *testing.T) {
	key := regexp.MustCompile(`^([a-z_]+:( |$)|  +- |    +[a-z_]+:)`)
	var text strings.Builder
	for _, l := range strings.Split(devAgentLocalExample, "\n") {
		if rest, ok := strings.CutPrefix(l, "# "); ok && key.MatchString(rest) {
			text.WriteString(rest + "\n")
		}
	}
	a, err := config.Parse([]byte(text.String()))
	if err != nil {
		t.Fatalf("uncommented example:\n%s\n%v", text.String(), err)
	}
	if len(a.DeclaredDevices) != 1 || a.Labels["role"] != "postgres" || len(a.MaintenanceWindows) != 1 {
		t.Errorf("uncommented example lost keys:\n%s\n%+v", text.String(), a)
	}
}
