package server

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/config"
)

// The dev agent config is marshalled from the agent's configuration type:
// it loads back through the agent's own loader with every value intact,
// whatever characters the paths hold (YAML quoting is the encoder's).
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
			if err := writeDevAgentConfig(l, "127.0.0.1:7443", "127.0.0.1:9465", false); err != nil {
				t.Fatal(err)
			}
			got, err := config.LoadRun(l.agentYAML)
			if err != nil {
				b, _ := os.ReadFile(l.agentYAML)
				t.Fatalf("LoadRun(dev agent.yaml) = %v\n%s", err, b)
			}
			want := config.WithDefaults(devAgentConfig(l, "127.0.0.1:7443", "127.0.0.1:9465", false))
			want.ReadSuperblocks, want.LVMBackupDir = config.Default().ReadSuperblocks, config.Default().LVMBackupDir
			if !reflect.DeepEqual(got.Server, want.Server) || got.Spool != want.Spool || got.Probes[0].Dir != l.probeDir || got.Probes[0].MountPoint != want.Probes[0].MountPoint ||
				got.Web != want.Web || strings.Join(got.OverrideFiles, ",") != "agent.local.yaml" {
				t.Errorf("loaded %+v\nwant %+v", got, want)
			}
		})
	}
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
