package exporter

import (
	"fmt"
	"hash/fnv"
	"net/url"
	"strconv"
)

// MaxShards is the most shards a scrape may split the exposition into.
const MaxShards = 1024

// shardSel is the part of the exposition a scrape asks for: shard i of n
// (n 0: all of it). A volume's series go to shard ShardOf(agent id, mount
// point) mod n; the fleet-wide and agent series (plumbline_volumes,
// cohorts, agents, ingest and evaluator counters, exporter_store_success)
// to shard 0, so the union of shards 0..n-1 is the whole exposition, each
// series exactly once.
type shardSel struct{ i, n int }

var allShards = shardSel{}

// hasGlobal reports whether the selection carries the fleet-wide series.
func (s shardSel) hasGlobal() bool { return s.n == 0 || s.i == 0 }

// has reports whether the selection carries the series of a volume whose
// key hashes to h.
func (s shardSel) has(h uint64) bool { return s.n == 0 || h%uint64(s.n) == uint64(s.i) }

// ShardOf is the stable hash that places a volume in a shard: 64-bit
// FNV-1a of the agent id, a NUL byte and the mount point. It depends on
// nothing but the volume's identity, so a volume stays in its shard across
// restarts, replicas and host renames; shard = ShardOf(...) mod shards.
func ShardOf(agentID, mountPoint string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(agentID))
	h.Write([]byte{0})
	h.Write([]byte(mountPoint))
	return h.Sum64()
}

func (k volKey) hash() uint64 { return ShardOf(k.agent, k.mount) }

// parseShard reads the shard and shards query parameters: both or
// neither, each at most once, 0 ≤ shard < shards ≤ MaxShards.
func parseShard(q url.Values) (shardSel, error) {
	shard, hasShard := q["shard"]
	shards, hasShards := q["shards"]
	if !hasShard && !hasShards {
		return allShards, nil
	}
	if !hasShard || !hasShards {
		return shardSel{}, fmt.Errorf("shard and shards go together: /metrics?shard=i&shards=n with 0 <= i < n <= %d", MaxShards)
	}
	if len(shard) != 1 || len(shards) != 1 {
		return shardSel{}, fmt.Errorf("shard and shards may each be given once")
	}
	n, err := strconv.Atoi(shards[0])
	if err != nil || n < 1 || n > MaxShards {
		return shardSel{}, fmt.Errorf("shards=%q: want a whole number from 1 to %d", shards[0], MaxShards)
	}
	i, err := strconv.Atoi(shard[0])
	if err != nil || i < 0 || i >= n {
		return shardSel{}, fmt.Errorf("shard=%q: want a whole number from 0 to %d (shards=%d)", shard[0], n-1, n)
	}
	if n == 1 {
		return allShards, nil // one shard is the whole exposition, and shares its cached body
	}
	return shardSel{i: i, n: n}, nil
}

// changeLog is what changed in the families since the last publish: a
// fleet-wide series, or series of volumes with these hashes. Cached
// bodies of the shards it touches are dropped.
type changeLog struct {
	global bool
	hashes []uint64
}

func (l *changeLog) note(owner *part) {
	if owner == nil {
		l.global = true
		return
	}
	if n := len(l.hashes); n == 0 || l.hashes[n-1] != owner.hash {
		l.hashes = append(l.hashes, owner.hash)
	}
}

// touches reports whether the changes reach the selection's series.
func (l *changeLog) touches(s shardSel) bool {
	if l.global && s.hasGlobal() {
		return true
	}
	for _, h := range l.hashes {
		if s.has(h) {
			return true
		}
	}
	return false
}

// WithFleetSeries reports whether a /metrics request's query asks for the
// fleet-wide series — the whole exposition, or shard 0 — so a handler
// that adds the server's own series adds them to that shard only (a bad
// query: false; the exporter answers it with a 400).
func WithFleetSeries(q url.Values) bool {
	sel, err := parseShard(q)
	return err == nil && sel.hasGlobal()
}
