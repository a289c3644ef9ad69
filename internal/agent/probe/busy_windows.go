package probe

// noBusyGuard is the busy guard's status on Windows, which has no
// per-device busy time for it yet.
const noBusyGuard = "unavailable: no per-device busy time on Windows yet"

// newBusySampler: none on Windows (noBusyGuard).
func newBusySampler(Options, *probeDir) (utilSampler, string, string) {
	return nil, "", noBusyGuard
}
