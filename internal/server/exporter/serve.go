package exporter

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
)

// bodyKey names a cached body: its format and shard (shards 0: the whole
// exposition).
type bodyKey struct {
	protobuf, gzip bool
	shard, shards  int
}

// maxBodies bounds the cached bodies: every format of every shard of a
// few shard counts. Past it, the cache starts again.
const maxBodies = 64

// Handler serves c's exposition on GET /metrics.
func Handler(c *Collector) (http.Handler, error) { return c, nil }

// ServeHTTP serves the exposition: delimited protobuf when the scraper
// asks for it (Prometheus does to ingest native histograms), text
// otherwise; gzip when accepted. ?shard=i&shards=n serves one shard
// (see shardSel); bad shard parameters are a 400 that says why.
func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sel, err := parseShard(r.URL.Query())
	if err != nil {
		http.Error(w, "metrics: "+err.Error(), http.StatusBadRequest)
		return
	}
	format := expfmt.Negotiate(r.Header)
	key := bodyKey{protobuf: format.FormatType() == expfmt.TypeProtoDelim, gzip: acceptsGzip(r.Header.Get("Accept-Encoding")),
		shard: sel.i, shards: sel.n}
	if !key.protobuf {
		format = expfmt.NewFormat(expfmt.TypeTextPlain)
	}
	c.mu.Lock()
	c.refresh(sel)
	body, err := c.body(key)
	c.mu.Unlock()
	if err != nil {
		c.opts.Logger.Error("encode metrics", "err", err)
		http.Error(w, "encode metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", string(format))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if key.gzip {
		h.Set("Content-Encoding", "gzip")
	}
	h.Add("Vary", "Accept-Encoding")
	w.Write(body)
}

func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(coding) != "gzip" {
			continue
		}
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// body returns the body of the current version in one format and shard,
// building it on first use. Bodies are never modified once built.
func (c *Collector) body(key bodyKey) ([]byte, error) {
	if b, ok := c.bodies[key]; ok {
		return b, nil
	}
	sel := shardSel{i: key.shard, n: key.shards}
	var picked [numFamilies][]*series
	n := 0
	for i := range c.out {
		picked[i] = c.out[i].selected(sel)
		size, _ := c.fams[i].size(picked[i], key.protobuf)
		n += size
	}
	raw := make([]byte, 0, n)
	for i := range c.out {
		raw = c.fams[i].appendTo(raw, picked[i], key.protobuf)
	}
	b := raw
	if key.gzip {
		var buf bytes.Buffer
		buf.Grow(len(raw) / 8)
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(raw)
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		b = buf.Bytes()
	}
	if c.bodies == nil || len(c.bodies) >= maxBodies {
		c.bodies = map[bodyKey][]byte{}
	}
	c.bodies[key] = b
	return b, nil
}
