package render

import (
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func u64(v uint64) *uint64 { return &v }

func sampleInventory() *plumblinev1.Inventory {
	return &plumblinev1.Inventory{
		Host: &plumblinev1.Host{Hostname: "db1", Os: "linux", CollectedAt: timestamppb.New(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))},
		Volumes: []*plumblinev1.Volume{{
			MountPoint: "/var/lib/pgsql",
			Filesystem: &plumblinev1.Filesystem{Type: "xfs", BlockSizeBytes: 4096, StripeUnitBytes: 65536, StripeWidthBytes: 131072},
			Layers: []*plumblinev1.Layer{
				{Kind: "partition", Device: "sdb1", OffsetBytes: u64(32256), SizeBytes: 1 << 40, Sources: map[string]string{"offset_bytes": "sysfs"}},
				{Kind: "disk", Device: "sdb", OffsetBytes: u64(0)},
			},
			Alignment: &plumblinev1.Alignment{
				Verdict: "misaligned", DataOffsetBytes: u64(32256), StripeUnitBytes: 65536,
				SplitFraction: map[uint32]float64{8192: 0.125, 65536: 1},
				Findings:      []*plumblinev1.Finding{{Rule: "partition-offset-stripe-unit", Severity: "critical"}},
			},
		}},
	}
}

func TestJSONNumbers(t *testing.T) {
	t.Parallel()
	b, err := JSON(sampleInventory())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Host struct {
			CollectedAt string `json:"collected_at"`
		} `json:"host"`
		Volumes []struct {
			MountPoint string `json:"mount_point"`
			Filesystem struct {
				StripeUnitBytes float64 `json:"stripe_unit_bytes"`
			} `json:"filesystem"`
			Layers []struct {
				Kind        string   `json:"kind"`
				OffsetBytes *float64 `json:"offset_bytes"`
				SizeBytes   float64  `json:"size_bytes"`
			} `json:"layers"`
			Alignment struct {
				Verdict         string             `json:"verdict"`
				DataOffsetBytes float64            `json:"data_offset_bytes"`
				SplitFraction   map[string]float64 `json:"split_fraction"`
			} `json:"alignment"`
		} `json:"volumes"`
	}
	// Decoding 64-bit fields into float64 fails if they are still strings.
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("JSON() output does not decode with numbers: %v\n%s", err, b)
	}
	v := got.Volumes[0]
	if v.Alignment.DataOffsetBytes != 32256 || v.Layers[0].SizeBytes != 1<<40 || v.Filesystem.StripeUnitBytes != 65536 {
		t.Errorf("numbers = %v %v %v, want 32256 2^40 65536", v.Alignment.DataOffsetBytes, v.Layers[0].SizeBytes, v.Filesystem.StripeUnitBytes)
	}
	if v.Layers[1].OffsetBytes == nil || *v.Layers[1].OffsetBytes != 0 {
		t.Errorf("disk offset_bytes = %v, want an explicit 0 (optional field set)", v.Layers[1].OffsetBytes)
	}
	if v.Alignment.SplitFraction["8192"] != 0.125 || v.Alignment.SplitFraction["65536"] != 1 {
		t.Errorf("split_fraction = %v", v.Alignment.SplitFraction)
	}
	if got.Host.CollectedAt != "2026-11-21T12:00:00Z" {
		t.Errorf("collected_at = %q, want RFC 3339", got.Host.CollectedAt)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	in := sampleInventory()
	b, err := JSON(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &plumblinev1.Inventory{}
	if err := protojson.Unmarshal(b, out); err != nil {
		t.Fatalf("protojson.Unmarshal(JSON()) = %v", err)
	}
	if !proto.Equal(in, out) {
		t.Errorf("round trip changed the message:\n in: %v\nout: %v", in, out)
	}
}
