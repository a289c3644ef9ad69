package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCapture writes a captured tree with one volume (/data on sdb1) and,
// when hostname is not empty, the capture's own kernel hostname.
func writeCapture(t *testing.T, hostname string) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, val string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(val+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	disk := "sys/devices/pci0/host0/block/sdb"
	write(disk+"/dev", "8:16")
	write(disk+"/size", "1953525168")
	write(disk+"/queue/logical_block_size", "512")
	write(disk+"/queue/physical_block_size", "4096")
	write(disk+"/sdb1/dev", "8:17")
	write(disk+"/sdb1/partition", "1")
	write(disk+"/sdb1/start", "2048")
	write("proc/self/mountinfo", "40 25 8:17 / /data rw - ext4 /dev/sdb1 rw")
	if hostname != "" {
		write("proc/sys/kernel/hostname", hostname)
		write("proc/sys/kernel/osrelease", "4.18.0-553.el8_10.x86_64")
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/dev/block"), 0o755); err != nil {
		t.Fatal(err)
	}
	for dev, target := range map[string]string{"8:16": "../../devices/pci0/host0/block/sdb", "8:17": "../../devices/pci0/host0/block/sdb/sdb1"} {
		if err := os.Symlink(target, filepath.Join(root, "sys/dev/block", dev)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestInspectCaptureHost: a captured tree is labelled with its own
// hostname, or none, never with the name of the machine that reads it.
func TestInspectCaptureHost(t *testing.T) {
	self, err := os.Hostname()
	if err != nil || self == "" {
		t.Fatalf("os.Hostname() = %q, %v: the test needs this machine's name to tell it apart", self, err)
	}
	named := writeCapture(t, "capdb7.example")
	bare := writeCapture(t, "")
	tests := []struct {
		name         string
		args         []string
		wantHost     string
		wantKernel   string
		wantWarning  string
		wantVolumes  int
		wantTableTop string
	}{
		{"capture with its own hostname", []string{"--path.sysfs", filepath.Join(named, "sys"), "--path.procfs", filepath.Join(named, "proc")},
			"capdb7.example", "4.18.0-553.el8_10.x86_64", "", 1, "host capdb7.example (linux 4.18.0-553.el8_10.x86_64)"},
		{"capture without a hostname", []string{"--path.sysfs", filepath.Join(bare, "sys"), "--path.procfs", filepath.Join(bare, "proc")},
			"", "", "names no host", 1, "host unknown (linux -)"},
		{"--path.sysfs alone: this machine's procfs says nothing about the capture", []string{"--path.sysfs", filepath.Join(named, "sys")},
			"", "", "no procfs of its own", -1, "host unknown (linux -)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), append([]string{"inspect", "--format", "json"}, tt.args...), &stdout, &stderr); code != exitOK {
				t.Fatalf("agent inspect %v = exit %d: %s", tt.args, code, stderr.String())
			}
			var got struct {
				Host struct {
					Hostname string `json:"hostname"`
					Kernel   string `json:"kernel"`
				} `json:"host"`
				Volumes []json.RawMessage `json:"volumes"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("agent inspect --format json: %v\n%s", err, stdout.String())
			}
			if got.Host.Hostname != tt.wantHost || got.Host.Kernel != tt.wantKernel {
				t.Errorf("agent inspect %v host = %q kernel %q, want %q kernel %q (this machine is %q)", tt.args, got.Host.Hostname, got.Host.Kernel, tt.wantHost, tt.wantKernel, self)
			}
			if tt.wantVolumes >= 0 && len(got.Volumes) != tt.wantVolumes {
				t.Errorf("agent inspect %v = %d volumes, want %d", tt.args, len(got.Volumes), tt.wantVolumes)
			}
			if tt.wantWarning == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tt.wantWarning) {
				t.Errorf("agent inspect %v stderr = %q, want %q", tt.args, stderr.String(), tt.wantWarning)
			}

			stdout.Reset()
			stderr.Reset()
			if code := run(t.Context(), append([]string{"inspect"}, tt.args...), &stdout, &stderr); code != exitOK {
				t.Fatalf("agent inspect %v = exit %d: %s", tt.args, code, stderr.String())
			}
			if first, _, _ := strings.Cut(stdout.String(), "\n"); first != tt.wantTableTop {
				t.Errorf("agent inspect %v table starts %q, want %q", tt.args, first, tt.wantTableTop)
			}
			if strings.Contains(stdout.String(), "host "+self+" ") {
				t.Errorf("agent inspect %v names this machine (%s):\n%s", tt.args, self, stdout.String())
			}
		})
	}
}
