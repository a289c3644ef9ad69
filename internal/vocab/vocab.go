// Package vocab is Plumbline's vocabulary: the words agent and server
// exchange and judge with — probe kinds and what each does, sync modes,
// stop reasons, the limits of a probe run as reported, the I/O sizes a
// verdict carries, verdicts, severities, RAID levels, layer kinds, value
// sources and snapshot triggers — each defined once, here. A test
// (TestWordsSpelledOnce) keeps the words out of other packages' code.
//
// Why a package and not proto enums: the wire carries these words as
// strings (ProbeResult.kind, stopped_reason, sync; Alignment.verdict;
// Finding.severity), and so do the store, the inventory API, the CSV
// export, metric labels and alert rules. Turning them into enums would
// change the wire format and every stored payload — a behaviour change —
// and several words (severity ranks, RAID levels, per-kind block-size
// limits) are not wire fields at all. A small Go package, importing only
// the standard library, lets both sides share the words without the server
// linking the agent's probe engine (internal/agent/probe) just to read constants.
//
// Every list is returned fresh by a function (or is an array): nothing here
// is an exported mutable slice.
//
// Adding a probe kind: one entry in probeKinds (probe_kinds.go) saying
// whether it writes, its access order and whether it is synced — the
// engine reads these — plus, for a judged kind, its priors; a geometry
// kind also has a runner in internal/agent/probe (docs/dev/vocabulary.md).
// Adding a layer kind: one entry in layerKinds (layers.go) plus the
// discovery that makes it. Adding an I/O size: one entry in ioSizes
// (words.go) plus a migration adding its columns (split_fraction_<key> on
// volumes; split_fraction_, granularity_split_fraction_ and
// measured_penalty_<key> on inventory_volumes; IOSizeKey names the key),
// then `make openapi`. Rule ids stay beside their rules in internal/align.
package vocab
