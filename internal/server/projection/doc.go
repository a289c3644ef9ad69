package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/render"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// VolumeJSON is the volume as `agent inspect --format json` prints it, plus
// where it lives and which record set it: the API's rendering of a volume
// whose judged record has no document (ingest's judge renders the
// documents it stores). The stored geometry carries no alignment.
func VolumeJSON(v store.Volume) (map[string]any, error) {
	var pv plumblinev1.Volume
	if err := proto.Unmarshal(v.Geometry, &pv); err != nil {
		return nil, fmt.Errorf("volume %s:%s: stored geometry: %w", v.Hostname, v.MountPoint, err)
	}
	b, err := render.JSON(&pv)
	if err != nil {
		return nil, fmt.Errorf("volume %s:%s: %w", v.Hostname, v.MountPoint, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep 64-bit integers exact
	obj := map[string]any{}
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("volume %s:%s: %w", v.Hostname, v.MountPoint, err)
	}
	obj["host"] = v.Hostname
	obj["agent_id"] = v.AgentID
	obj["mount_point"] = v.MountPoint
	obj["sequence"] = v.Sequence
	if !v.ObservedAt.IsZero() {
		obj["observed_at"] = v.ObservedAt.UTC().Format(time.RFC3339Nano)
	}
	return obj, nil
}

// AddDerived sets the derived columns a volume document carries besides
// the inspect shape: id, media, profile, raid_level, severity.
func AddDerived(obj map[string]any, iv *store.InventoryVolume) {
	obj["id"] = iv.ID
	obj["media"] = iv.Media
	obj["profile"] = iv.Profile
	obj["raid_level"] = iv.RAIDLevel
	obj["severity"] = iv.Severity
}
