package store

import (
	"encoding/json"
	"fmt"
)

// ArrayActivity is one md array's sync action around a probe run, as the
// agent read md/sync_action, sync_completed and sync_speed
// (plumbline.v1.ArrayActivity): stored with the run (probe_results.
// array_activity, migration 00032) so that the evaluator judges the run in
// that context.
type ArrayActivity struct {
	Device string `json:"device"`
	// Action is the md sync action (resync, recover, reshape, check,
	// repair, or a word this version does not know).
	Action string `json:"action"`
	// DoneSectors of TotalSectors (512 bytes each); both 0 when md did not
	// say.
	DoneSectors  uint64 `json:"done_sectors"`
	TotalSectors uint64 `json:"total_sectors"`
	// SpeedBytesPerSecond is md/sync_speed (0: md did not say).
	SpeedBytesPerSecond uint64 `json:"speed_bytes_per_second"`
}

// encodeArrayActivity is the column's value: NULL for a run without
// activity, else the JSON list.
func encodeArrayActivity(a []ArrayActivity) any {
	if len(a) == 0 {
		return nil
	}
	b, err := json.Marshal(a)
	if err != nil { // plain data: cannot fail
		panic(err)
	}
	return string(b)
}

// decodeArrayActivity reads the column back (NULL or empty: none).
func decodeArrayActivity(s []byte) ([]ArrayActivity, error) {
	if len(s) == 0 {
		return nil, nil
	}
	var a []ArrayActivity
	if err := json.Unmarshal(s, &a); err != nil {
		return nil, fmt.Errorf("array activity: %w", err)
	}
	return a, nil
}
