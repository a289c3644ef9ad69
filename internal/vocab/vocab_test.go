package vocab

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// vocab is the bottom of the import graph: both sides import it, it imports
// nothing of Plumbline's.
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/plumbline/plumbline/internal/vocab").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, []string{"github.com/plumbline/plumbline/internal/vocab"}) {
		t.Errorf("internal/vocab depends on %v: want only the standard library", got)
	}
}

// stripe-scan is reported and stored, but not in the default schedule and
// not judged by the degradation detector: its latency is a measurement of
// geometry, not of the volume's health.
func TestStripeScanReportedNotJudged(t *testing.T) {
	t.Parallel()
	if want := []ProbeKind{RandomRead, RandomWrite, LogWrite, StripeScan}; !slices.Equal(ProbeKinds(), want) || !slices.Equal(ProbedKinds(), want) {
		t.Errorf("ProbeKinds() = %v, ProbedKinds() = %v, want %v", ProbeKinds(), ProbedKinds(), want)
	}
	three := []ProbeKind{RandomRead, RandomWrite, LogWrite}
	if !slices.Equal(DefaultProbeKinds(), three) || !slices.Equal(JudgedProbeKinds(), three) {
		t.Errorf("DefaultProbeKinds() = %v, JudgedProbeKinds() = %v, want %v", DefaultProbeKinds(), JudgedProbeKinds(), three)
	}
	if IsJudged(StripeScan) || !IsJudged(LogWrite) || IsJudged("no-such-kind") {
		t.Error("IsJudged: want true for the three latency kinds only")
	}
	s, ok := LookupProbeKind(StripeScan)
	lo, hi := s.BlockSizes()
	if !ok || lo != StripeScanBlockSize || hi != StripeScanBlockSize || s.OpsLimit() != StripeScanMaxOps || s.MinFileSize != StripeScanMinFileSize || s.QueueDepthLimit() != 1 {
		t.Errorf("LookupProbeKind(%s) = %+v, %v: want reported, 8 KiB only, %d ops, 16 MiB file, queue depth 1", StripeScan, s, ok, StripeScanMaxOps)
	}
}

func TestProbeKindSpecs(t *testing.T) {
	t.Parallel()
	s, ok := LookupProbeKind(LogWrite)
	if !ok || !s.Synced || s.MaxBlockSize != MaxLogBlockSize {
		t.Errorf("LookupProbeKind(log-write) = %+v, %v: want synced, at most %d", s, ok, MaxLogBlockSize)
	}
	if s, _ := LookupProbeKind(RandomRead); s.Synced || s.MaxBlockSize != MaxBlockSize {
		t.Errorf("LookupProbeKind(random-read) = %+v: want unsynced, at most %d", s, MaxBlockSize)
	}
	// A spec's zero limits are the package's: the latency kinds take any
	// block size, queue depth and op count the engine does.
	for _, k := range JudgedProbeKinds() {
		s, _ := LookupProbeKind(k)
		if lo, hi := s.BlockSizes(); lo != MinBlockSize || hi != uint64(s.MaxBlockSize) || s.OpsLimit() != MaxOps || s.QueueDepthLimit() != MaxQueueDepth {
			t.Errorf("%s: block sizes %d to %d, ops %d, queue depth %d: want %d to %d, %d, %d",
				k, lo, hi, s.OpsLimit(), s.QueueDepthLimit(), MinBlockSize, s.MaxBlockSize, MaxOps, MaxQueueDepth)
		}
	}
	if lo, hi := (ProbeKindSpec{}).BlockSizes(); lo != MinBlockSize || hi != MaxBlockSize {
		t.Errorf("zero spec block sizes %d to %d, want %d to %d", lo, hi, MinBlockSize, MaxBlockSize)
	}
}

// Every list is a fresh copy: a caller that writes into one changes nothing
// for the next.
func TestListsAreImmutable(t *testing.T) {
	t.Parallel()
	lists := map[string]func() []string{
		"ProbeKindNames": ProbeKindNames, "SyncModeNames": SyncModeNames, "StopReasons": StopReasons,
		"NotRunReasons": NotRunReasons, "IOSizeNames": IOSizeNames, "Verdicts": Verdicts,
		"Severities": Severities, "RAIDLevels": RAIDLevels, "DeclarableRAIDLevels": DeclarableRAIDLevels, "LayerRAIDLevels": LayerRAIDLevels,
		"LayerKindNames": LayerKindNames, "SourceNames": SourceNames, "TriggerNames": TriggerNames,
	}
	for name, f := range lists {
		a := f()
		if len(a) == 0 {
			t.Errorf("%s() is empty", name)
			continue
		}
		want := slices.Clone(a)
		a[0] = "scribbled"
		if got := f(); !slices.Equal(got, want) {
			t.Errorf("%s() after a caller wrote into its result = %v, want %v", name, got, want)
		}
	}
	s := IOSizes()
	s[0] = 1
	if IOSizes()[0] != 8<<10 {
		t.Errorf("IOSizes() changed by a caller: %v", IOSizes())
	}
}

func TestWords(t *testing.T) {
	t.Parallel()
	for _, r := range NotRunReasons() {
		if !slices.Contains(StopReasons(), r) {
			t.Errorf("not-run reason %q is not a stop reason", r)
		}
	}
	if got, want := NotRunReasons(), []string{StopRefused, StopFailed, StopLockTimeout}; !slices.Equal(got, want) {
		t.Errorf("NotRunReasons() = %v, want %v", got, want)
	}
	if IsNotRun(StopBusy) || IsNotRun("") || !IsNotRun(StopLockTimeout) {
		t.Error("IsNotRun: want true only for refused, failed, lock-timeout")
	}
	if !(SeverityRank(Critical) > SeverityRank(Warning) && SeverityRank(Warning) > SeverityRank(Info) && SeverityRank(Info) > SeverityRank("none")) {
		t.Errorf("SeverityRank: critical %d, warning %d, info %d, none %d: want strictly descending", SeverityRank(Critical), SeverityRank(Warning), SeverityRank(Info), SeverityRank("none"))
	}
	if got := IOSizeNames(); !slices.Equal(got, []string{"8192", "65536"}) {
		t.Errorf("IOSizeNames() = %v", got)
	}
	if n, ok := RAIDMinDisks("raid60"); !ok || n != 8 {
		t.Errorf("RAIDMinDisks(raid60) = %d, %v, want 8", n, ok)
	}
	if got := LayerRAIDLevels(); slices.Contains(got, NoRAID) || len(got) != len(RAIDLevels())-1 {
		t.Errorf("LayerRAIDLevels() = %v: want every level but %s", got, NoRAID)
	}
	for _, l := range []string{NoRAID, "linear", "raid7"} {
		if _, ok := RAIDMinDisks(l); ok {
			t.Errorf("RAIDMinDisks(%q): want not declarable", l)
		}
	}
}

// The I/O sizes are distinct whole KiB, smallest first, so that their
// keys (column and field names) are distinct and per-size arrays follow
// one order; IOSizeIndex and IOSize are inverse.
func TestIOSizeKeys(t *testing.T) {
	t.Parallel()
	if got, want := IOSizeKey(8<<10), "8k"; got != want {
		t.Errorf("IOSizeKey(8192) = %q, want %q", got, want)
	}
	if got, want := IOSizeKey(64<<10), "64k"; got != want {
		t.Errorf("IOSizeKey(65536) = %q, want %q", got, want)
	}
	sizes := IOSizes()
	if len(sizes) != NumIOSizes {
		t.Fatalf("len(IOSizes()) = %d, NumIOSizes = %d", len(sizes), NumIOSizes)
	}
	for i, s := range sizes {
		if s%1024 != 0 || s == 0 {
			t.Errorf("I/O size %d: want a whole number of KiB", s)
		}
		if i > 0 && s <= sizes[i-1] {
			t.Errorf("IOSizes() = %v: want ascending", sizes)
		}
		if IOSize(i) != s {
			t.Errorf("IOSize(%d) = %d, want %d", i, IOSize(i), s)
		}
		if j, ok := IOSizeIndex(s); !ok || j != i {
			t.Errorf("IOSizeIndex(%d) = %d, %v, want %d", s, j, ok, i)
		}
	}
	if _, ok := IOSizeIndex(4096 + 1); ok {
		t.Error("IOSizeIndex(4097) found a size vocab does not list")
	}
}
