//go:build !linux && !windows

package agent

// noMountTable: no mount table is watched; discovery runs at start and
// every geometry_refresh only.
type noMountTable struct{}

func newMountTable(string) mountTable { return noMountTable{} }

func (noMountTable) fingerprint() uint64 { return 0 }
