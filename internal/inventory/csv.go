package inventory

import (
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/store"
)

// VolumeCSVColumns are the columns of GET /api/v1/volumes?format=csv: what
// a change ticket needs to name the volume, say what is wrong, and how to
// fix it. Unknown numbers are empty cells.
var VolumeCSVColumns = []string{
	"id", "host", "agent_id", "mount_point", "device", "fs_type", "verdict",
	"data_offset_bytes", "stripe_unit_bytes", "allocation_unit_bytes", "raid_level", "media", "profile",
	"split_fraction_8k", "split_fraction_64k", "severity", "rules",
	"finding_rule", "finding", "remediation", "degraded", "observed_at",
}

// HostCSVColumns are the columns of GET /api/v1/hosts?format=csv.
var HostCSVColumns = []string{
	"host", "agent_id", "os", "kernel", "agent_version", "first_seen", "last_seen", "volume_count", "misaligned_count",
}

// csvFlushRows is how many rows go out between two flushes.
const csvFlushRows = 512

// csvWriter streams CSV rows to a response and flushes every csvFlushRows.
type csvWriter struct {
	w  http.ResponseWriter
	cw *csv.Writer
	n  int
}

func newCSV(w http.ResponseWriter, name, next string, header []string) *csvWriter {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if next != "" {
		w.Header().Set("X-Next-Page-Token", next)
	}
	w.WriteHeader(http.StatusOK)
	c := &csvWriter{w: w, cw: csv.NewWriter(w)}
	c.cw.Write(header)
	return c
}

func (c *csvWriter) row(cells []string) error {
	for i, s := range cells {
		cells[i] = cell(s)
	}
	if err := c.cw.Write(cells); err != nil {
		return err
	}
	c.n++
	if c.n%csvFlushRows == 0 {
		return c.flush()
	}
	return nil
}

func (c *csvWriter) flush() error {
	c.cw.Flush()
	if f, ok := c.w.(http.Flusher); ok {
		f.Flush()
	}
	return c.cw.Error()
}

// cell defuses a text that a spreadsheet would run as a formula (it
// starts with =, +, -, @, a tab or a carriage return) by prefixing a
// single quote, as OWASP recommends. Quoting of commas, quotes and line
// breaks is encoding/csv's.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return "'" + s
		}
	}
	return s
}

func intCell(n int64) string {
	if n < 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

func fracCell(f float64) string {
	if f < 0 {
		return ""
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func timeCell(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func volumeRow(v *store.InventoryVolume) []string {
	var rule, msg, fix, degraded string
	if f := v.TopFinding; f != nil {
		rule, msg, fix = f.Rule, f.Message, f.Remediation
	}
	if v.Baseline != nil {
		degraded = strconv.FormatBool(v.Baseline.Degraded)
	}
	return []string{
		v.ID, v.Hostname, v.AgentID, v.MountPoint, v.Device, v.FSType, v.Verdict,
		intCell(v.DataOffsetBytes), intCell(v.StripeUnitBytes), intCell(v.AllocationUnitBytes), v.RAIDLevel, v.Media, v.Profile,
		fracCell(v.SplitFraction8K), fracCell(v.SplitFraction64K), v.Severity, strings.Join(v.Rules, " "),
		rule, msg, fix, degraded, timeCell(v.ObservedAt),
	}
}

// volumesCSV streams the query's volumes as CSV: one row in memory at a
// time when unpaged; a page (limit given) carries the next page's token in
// the X-Next-Page-Token header.
func (a *API) volumesCSV(w http.ResponseWriter, r *http.Request, q store.VolumeQuery, hash uint64) {
	if q.Limit > 0 {
		rows, next, err := a.page(r, q, hash)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		c := newCSV(w, "plumbline-volumes.csv", next, VolumeCSVColumns)
		for _, v := range rows {
			if err := c.row(volumeRow(v)); err != nil {
				return
			}
		}
		c.flush()
		return
	}
	var c *csvWriter
	err := a.st.QueryVolumes(r.Context(), q, func(v *store.InventoryVolume) error {
		if c == nil {
			c = newCSV(w, "plumbline-volumes.csv", "", VolumeCSVColumns)
		}
		return c.row(volumeRow(v))
	})
	switch {
	case err != nil && c == nil:
		a.fail(w, r, err)
	case err != nil:
		// The header is out: cut the connection so the client sees a
		// truncated download rather than a short, complete-looking file.
		a.opts.Logger.Error("inventory CSV", "err", err)
		panic(http.ErrAbortHandler)
	case c == nil:
		newCSV(w, "plumbline-volumes.csv", "", VolumeCSVColumns).flush()
	default:
		c.flush()
	}
}
