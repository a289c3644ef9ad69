package inventory

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// VolumeCSVColumns are the columns of GET /api/v1/volumes?format=csv: what
// a change ticket needs to name the volume, say what is wrong, and how to
// fix it. Unknown numbers are empty cells.
func VolumeCSVColumns() []string {
	return slices.Concat(volumeCSVColumns, measuredCSVColumns(), []string{"slow_members"}, databaseCSVColumns[:])
}

// databaseCSVColumns are the database judge's state of the volume,
// appended last (empty for a volume holding no database files).
var databaseCSVColumns = [...]string{"database_state", "database_attribution", "database_reason"}

// volumeCSVColumns are VolumeCSVColumns but the measured ones (computed
// once, never written); the per-size columns are one per vocab.IOSizes,
// prefix + vocab.IOSizeKey.
var volumeCSVColumns = slices.Concat([]string{
	"id", "host", "agent_id", "mount_point", "device", "fs_type", "verdict",
	"data_offset_bytes", "stripe_unit_bytes", "allocation_unit_bytes", "raid_level", "media", "profile"},
	sizeNames("split_fraction_"), []string{"severity", "rules",
		"finding_rule", "finding", "remediation", "degraded", "observed_at"},
	// Appended last so that readers by position keep working: the split
	// at any offset from the allocation grid (split_fraction_* is the
	// offset-caused split), then what the geometry probe measured
	// (measuredCSVColumns).
	sizeNames("granularity_split_fraction_"),
)

// sizeNames are prefix + vocab.IOSizeKey of every I/O size, in
// vocab.IOSizes order: split_fraction_8k, split_fraction_64k.
func sizeNames(prefix string) []string {
	var out []string
	for _, s := range vocab.IOSizes() {
		out = append(out, prefix+vocab.IOSizeKey(s))
	}
	return out
}

// HostCSVColumns are the columns of GET /api/v1/hosts?format=csv.
func HostCSVColumns() []string { return slices.Clone(hostCSVColumns[:]) }

var hostCSVColumns = [...]string{
	"host", "agent_id", "os", "kernel", "agent_version", "first_seen", "last_seen", "volume_count", "misaligned_count",
	"client_certificate_not_after", "stored_bytes_today", "records_rejected", "quota_refusals",
}

// csvBufferSize is how much CSV is gathered before it goes out (and is
// flushed to the client).
const csvBufferSize = 64 << 10

// csvWriter streams CSV to a response through one reused buffer: cells
// are appended to it (quoted as encoding/csv quotes them, formula-like
// texts defused), and it goes out whenever it holds csvBufferSize, so a
// row costs no allocation of its own and memory stays flat however many
// rows there are.
type csvWriter struct {
	w   http.ResponseWriter
	buf []byte
	n   int // cells in the current row
	err error
}

func newCSV(w http.ResponseWriter, name, next string, header []string) *csvWriter {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if next != "" {
		w.Header().Set("X-Next-Page-Token", next)
	}
	w.WriteHeader(http.StatusOK)
	c := &csvWriter{w: w, buf: make([]byte, 0, csvBufferSize+4<<10)}
	c.row(header)
	return c
}

// row writes a row of text cells.
func (c *csvWriter) row(cells []string) error {
	for _, s := range cells {
		c.text(s)
	}
	return c.end()
}

// text appends a text cell, defused (see cell) and quoted where
// encoding/csv would quote it: a comma, double quote, CR or LF in it, a
// leading Unicode space, or `\.`.
func (c *csvWriter) text(s string) {
	c.sep()
	prefix := ""
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			prefix = "'"
		}
	}
	quote := strings.ContainsAny(s, ",\"\r\n") || (prefix == "" && (s == `\.` || startsWithSpace(s)))
	if !quote {
		c.buf = append(c.buf, prefix...)
		c.buf = append(c.buf, s...)
		return
	}
	c.buf = append(c.buf, '"')
	c.buf = append(c.buf, prefix...)
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			c.buf = append(c.buf, '"')
		}
		c.buf = append(c.buf, s[i])
	}
	c.buf = append(c.buf, '"')
}

// startsWithSpace is encoding/csv's rule: a field whose first rune is a
// Unicode space is quoted.
func startsWithSpace(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(r)
}

// int appends a number cell, empty when negative (unknown).
func (c *csvWriter) int(n int64) {
	c.sep()
	if n >= 0 {
		c.buf = strconv.AppendInt(c.buf, n, 10)
	}
}

// frac appends a fraction cell, empty when negative (unknown).
func (c *csvWriter) frac(f float64) {
	c.sep()
	if f >= 0 {
		c.buf = strconv.AppendFloat(c.buf, f, 'g', -1, 64)
	}
}

// time appends a time cell (RFC 3339, UTC), empty for the zero time.
func (c *csvWriter) time(t time.Time) {
	c.sep()
	if !t.IsZero() {
		c.buf = t.UTC().AppendFormat(c.buf, time.RFC3339)
	}
}

func (c *csvWriter) sep() {
	if c.n > 0 {
		c.buf = append(c.buf, ',')
	}
	c.n++
}

// end ends the row; the buffer goes out when full.
func (c *csvWriter) end() error {
	c.buf = append(c.buf, '\n')
	c.n = 0
	if len(c.buf) >= csvBufferSize {
		return c.flush()
	}
	return c.err
}

// flush writes out what is buffered and flushes the response.
func (c *csvWriter) flush() error {
	if c.err != nil {
		return c.err
	}
	if len(c.buf) > 0 {
		if _, err := c.w.Write(c.buf); err != nil {
			c.err = err
			return err
		}
		c.buf = c.buf[:0]
	}
	if f, ok := c.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
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

// volumeRow writes the row of a volume (VolumeCSVColumns).
func (c *csvWriter) volumeRow(v *store.InventoryVolume) error {
	var rule, msg, fix string
	if f := v.TopFinding; f != nil {
		rule, msg, fix = f.Rule, f.Message, f.Remediation
	}
	for _, s := range [...]string{v.ID, v.Hostname, v.AgentID, v.MountPoint, v.Device, v.FSType, v.Verdict} {
		c.text(s)
	}
	for _, n := range [...]int64{v.DataOffsetBytes, v.StripeUnitBytes, v.AllocationUnitBytes} {
		c.int(n)
	}
	for _, s := range [...]string{v.RAIDLevel, v.Media, v.Profile} {
		c.text(s)
	}
	c.fracs(&v.SplitFraction)
	c.text(v.Severity)
	c.sep()
	rules := len(c.buf)
	for i, r := range v.Rules {
		if i > 0 {
			c.buf = append(c.buf, ' ')
		}
		c.buf = append(c.buf, r...)
	}
	if joined := c.buf[rules:]; needsQuoting(joined) {
		// Rule ids are plain words; this never runs for real ones.
		s := string(joined)
		c.buf = c.buf[:rules]
		c.n--
		c.text(s)
	}
	c.text(rule)
	c.text(msg)
	c.text(fix)
	c.sep()
	if v.Baseline != nil {
		c.buf = strconv.AppendBool(c.buf, v.Baseline.Degraded)
	}
	c.time(v.ObservedAt)
	c.fracs(&v.GranularitySplit)
	c.measured(v)
	c.text(slowMembersCell(v.SlowMembers))
	var db store.DatabaseVolume
	if v.Database != nil {
		db = *v.Database
	}
	c.text(db.State)
	c.text(db.Attribution)
	c.text(db.Reason)
	return c.end()
}

// slowMembersCell is the slow_members cell: each slow member below the
// volume as "array/member (serial S) direction ×ratio since T", joined
// with "; "; empty for none.
func slowMembersCell(ms []store.SlowMember) string {
	if len(ms) == 0 {
		return ""
	}
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(m.Array + "/" + m.Member)
		if m.Serial != "" {
			b.WriteString(" (serial " + m.Serial + ")")
		}
		b.WriteString(" " + m.Direction + " ×" + strconv.FormatFloat(m.Ratio, 'f', 1, 64) + " since " + timeCell(m.Since))
	}
	return b.String()
}

// measured appends the cells of measuredCSVColumns: empty where nothing
// was measured (a confidence of 0 is none).
func (c *csvWriter) measured(v *store.InventoryVolume) {
	c.text(v.StripeUnitSource)
	if v.StripeUnitConfidence > 0 {
		c.frac(v.StripeUnitConfidence)
	} else {
		c.sep()
	}
	c.frac(v.MeasuredSplitCost)
	c.frac(v.MeasuredSplitCostLow)
	c.frac(v.MeasuredSplitCostHigh)
	c.fracs(&v.MeasuredPenalty)
}

// fracs appends the cells of a per-I/O-size figure, one per vocab.IOSizes.
func (c *csvWriter) fracs(fs *[vocab.NumIOSizes]float64) {
	for _, f := range fs {
		c.frac(f)
	}
}

// measuredCSVColumns are the CSV's columns of what the geometry probe
// measured, appended after the others.
func measuredCSVColumns() []string {
	return append([]string{"stripe_unit_source", "stripe_unit_confidence", "measured_split_cost_seconds",
		"measured_split_cost_low_seconds", "measured_split_cost_high_seconds"},
		sizeNames("measured_penalty_seconds_")...)
}

// needsQuoting says whether appended bytes would need quoting or defusing
// as a text cell.
func needsQuoting(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	return bytes.ContainsAny(b, ",\"\r\n") || strings.ContainsRune("=+-@\t\r \\", rune(b[0])) || b[0] >= utf8.RuneSelf
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
		c := newCSV(w, "plumbline-volumes.csv", next, VolumeCSVColumns())
		for _, v := range rows {
			if err := c.volumeRow(v); err != nil {
				return
			}
		}
		c.flush()
		return
	}
	s := a.csvStream(w, r, "plumbline-volumes.csv", VolumeCSVColumns())
	s.end(a.st.QueryVolumes(r.Context(), q, func(v *store.InventoryVolume) error { return s.writer().volumeRow(v) }))
}

// csvStream is an unpaged CSV answer: the header goes out with the first
// row, so an error before it is still an error answer.
type csvStream struct {
	a      *API
	w      http.ResponseWriter
	r      *http.Request
	name   string
	header []string
	c      *csvWriter
}

func (a *API) csvStream(w http.ResponseWriter, r *http.Request, name string, header []string) *csvStream {
	return &csvStream{a: a, w: w, r: r, name: name, header: header}
}

// writer is the stream's CSV writer, the header written when first asked.
func (s *csvStream) writer() *csvWriter {
	if s.c == nil {
		s.c = newCSV(s.w, s.name, "", s.header)
	}
	return s.c
}

// end finishes the stream after the query's err.
func (s *csvStream) end(err error) {
	switch {
	case err != nil && s.c == nil:
		s.a.fail(s.w, s.r, err)
	case err != nil:
		// The header is out: cut the connection so the client sees a
		// truncated download rather than a short, complete-looking file.
		s.a.opts.Logger.Error("inventory CSV", "err", err)
		panic(http.ErrAbortHandler)
	default:
		s.writer().flush()
	}
}
