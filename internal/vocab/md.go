package vocab

import "fmt"

// The md driver's own words for an array's and a member's state
// (Documentation/admin-guide/md.rst): read by discovery, carried in
// RaidHealth and judged by the RAID health rules. They are the kernel's,
// spelled as it writes them; a word not listed here is kept as written and
// judged as unknown.

// MD array states (md/array_state).
const (
	MDClear        = "clear"
	MDInactive     = "inactive"
	MDSuspended    = "suspended"
	MDReadonly     = "readonly"
	MDReadAuto     = "read-auto"
	MDClean        = "clean"
	MDActive       = "active"
	MDWritePending = "write-pending"
	MDActiveIdle   = "active-idle"
	MDBroken       = "broken"
)

// MD sync actions (md/sync_action, md/last_sync_action).
const (
	MDIdle    = "idle"
	MDResync  = "resync"
	MDRecover = "recover"
	MDCheck   = "check"
	MDRepair  = "repair"
	MDReshape = "reshape"
	MDFrozen  = "frozen"
)

// MD member state flags (md/dev-*/state, comma-separated).
const (
	MDFaulty          = "faulty"
	MDInSync          = "in_sync"
	MDSpare           = "spare"
	MDWriteMostly     = "write_mostly"
	MDBlocked         = "blocked"
	MDWriteError      = "write_error"
	MDWantReplacement = "want_replacement"
	MDReplacement     = "replacement"
	MDJournal         = "journal"
	MDFailfast        = "failfast"
	MDExternalBBL     = "external_bbl"
)

var (
	mdArrayStates = [...]string{MDClear, MDInactive, MDSuspended, MDReadonly, MDReadAuto, MDClean, MDActive, MDWritePending, MDActiveIdle, MDBroken}
	mdSyncActions = [...]string{MDIdle, MDResync, MDRecover, MDCheck, MDRepair, MDReshape, MDFrozen}
	mdMemberFlags = [...]string{MDFaulty, MDInSync, MDSpare, MDWriteMostly, MDBlocked, MDWriteError, MDWantReplacement, MDReplacement, MDJournal, MDFailfast, MDExternalBBL}
)

// MDArrayStates lists the md/array_state words.
func MDArrayStates() []string { return append([]string(nil), mdArrayStates[:]...) }

// MDSyncActions lists the md/sync_action words.
func MDSyncActions() []string { return append([]string(nil), mdSyncActions[:]...) }

// MDMemberFlags lists the md/dev-*/state flags.
func MDMemberFlags() []string { return append([]string(nil), mdMemberFlags[:]...) }

// MDSyncRebuilds says whether sync action a rewrites redundancy the array
// lacks or is changing (resync, recover, reshape): the array is slower
// and, until it ends, less safe.
func MDSyncRebuilds(a string) bool { return a == MDResync || a == MDRecover || a == MDReshape }

// MDSyncScrubs says whether sync action a reads the array to compare
// copies (check) or to rewrite those that differ (repair).
func MDSyncScrubs(a string) bool { return a == MDCheck || a == MDRepair }

// MaxMDWord bounds one md word on the wire (the longest the kernel writes
// is "want_replacement").
const MaxMDWord = 32

// MaxMDMemberFlags bounds the flags of one member's state.
const MaxMDMemberFlags = 16

// CheckMDWord accepts what md writes as a word, known or not: lower-case
// letters, digits, '_' and '-', 1 to MaxMDWord bytes.
func CheckMDWord(s string) error {
	if s == "" || len(s) > MaxMDWord {
		return fmt.Errorf("word %q: want 1 to %d bytes", s, MaxMDWord)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("word %q: want lower-case letters, digits, '_' and '-'", s)
		}
	}
	return nil
}

// MaxArrayActivity bounds the md arrays one probe run records as running
// a sync action (ProbeResult.array_activity).
const MaxArrayActivity = 16
