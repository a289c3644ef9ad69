package inventory

import (
	"net/http"
	"strconv"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// Host is one entry of /api/v1/hosts.
type Host struct {
	AgentID      string    `json:"agent_id"`
	Hostname     string    `json:"hostname"`
	OS           string    `json:"os"`
	Kernel       string    `json:"kernel"`
	MachineID    string    `json:"machine_id"`
	AgentVersion string    `json:"agent_version"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
	// HighWaterSequence is the dedup high-water mark of the agent's
	// current spool incarnation (Incarnation: the one that said Hello
	// last; empty for agents from before incarnations).
	HighWaterSequence uint64 `json:"high_water_sequence"`
	Incarnation       string `json:"incarnation"`
	// IdentityConflicts counts the times two live agents were seen on this
	// identity (an incarnation that a newer one had replaced spoke again:
	// two hosts sharing one certificate, or a copied spool), and
	// IdentityConflictAt is the last (null: never).
	IdentityConflicts  uint64     `json:"identity_conflicts"`
	IdentityConflictAt *time.Time `json:"identity_conflict_at"`
	// ClientCertificateNotBefore/NotAfter are the validity of the client
	// certificate the agent presented at its last Hello (null without
	// one: insecure mode, or not connected since the server learned it).
	ClientCertificateNotBefore *time.Time `json:"client_certificate_not_before"`
	ClientCertificateNotAfter  *time.Time `json:"client_certificate_not_after"`
	// Volumes and Misaligned count its present volumes.
	Volumes    int64 `json:"volume_count"`
	Misaligned int64 `json:"misaligned_count"`
	// StoredBytesToday is what the agent's records stored today (UTC)
	// cost against its storage quota (grpc.quota.max_bytes_per_day);
	// RecordsRejected counts the records the server refused as invalid;
	// QuotaRefusals the batches refused for a quota (storage or record
	// rate), which the agent keeps and sends again.
	StoredBytesToday uint64 `json:"stored_bytes_today"`
	RecordsRejected  uint64 `json:"records_rejected"`
	QuotaRefusals    uint64 `json:"quota_refusals"`
}

func hostJSON(h *store.InventoryHost) Host {
	out := Host{
		AgentID: h.ID, Hostname: h.Hostname, OS: h.OS, Kernel: h.Kernel, MachineID: h.MachineID,
		AgentVersion: h.AgentVersion, FirstSeen: h.FirstSeen, LastSeen: h.LastSeen, HighWaterSequence: h.HighWater,
		Incarnation: h.Incarnation, IdentityConflicts: h.IdentityConflicts,
		Volumes: h.Volumes, Misaligned: h.Misaligned,
		StoredBytesToday: h.StoredBytesOn(time.Now()), RecordsRejected: h.RecordsRejected, QuotaRefusals: h.QuotaRefusals,
	}
	if !h.IdentityConflictAt.IsZero() {
		at := h.IdentityConflictAt
		out.IdentityConflictAt = &at
	}
	if !h.CertNotAfter.IsZero() {
		nb, na := h.CertNotBefore, h.CertNotAfter
		out.ClientCertificateNotBefore, out.ClientCertificateNotAfter = &nb, &na
	}
	return out
}

// hostQuery reads the parameters of GET /api/v1/hosts: the query, the
// format, the page size (0: all, CSV streamed) and the hash of the query.
func hostQuery(r *http.Request) (q store.HostQuery, format string, limit int, hash uint64, err error) {
	p, err := newParams(r, hostListParams)
	if err != nil {
		return q, "", 0, 0, err
	}
	if q.Host, err = p.str("host"); err != nil {
		return q, "", 0, 0, err
	}
	if _, q.Desc, err = p.sortParam([]string{"host"}, "host"); err != nil {
		return q, "", 0, 0, err
	}
	if format, err = p.format(r); err != nil {
		return q, "", 0, 0, err
	}
	if limit, err = p.limit(); err != nil {
		return q, "", 0, 0, err
	}
	if format == "csv" && !p.has("limit") {
		limit = 0
	}
	hash = queryHash("hosts", p)
	q.After, err = p.token(hash, "ss")
	return q, format, limit, hash, err
}

func (a *API) hosts(w http.ResponseWriter, r *http.Request) {
	q, format, limit, hash, err := hostQuery(r)
	if err == nil {
		err = a.ready(r.Context())
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if format == "csv" && limit == 0 {
		s := a.csvStream(w, r, "plumbline-hosts.csv", HostCSVColumns())
		s.end(a.st.QueryHosts(r.Context(), q, func(h *store.InventoryHost) error { return s.writer().row(hostRow(h)) }))
		return
	}
	q.Limit = limit + 1
	var rows []*store.InventoryHost
	if err := a.st.QueryHosts(r.Context(), q, func(h *store.InventoryHost) error {
		rows = append(rows, h)
		return nil
	}); err != nil {
		a.fail(w, r, err)
		return
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = encodeToken(hash, []any{last.Hostname, last.ID})
	}
	if format == "csv" {
		c := newCSV(w, "plumbline-hosts.csv", next, HostCSVColumns())
		for _, h := range rows {
			if c.row(hostRow(h)) != nil {
				return
			}
		}
		c.flush()
		return
	}
	out := make([]Host, 0, len(rows))
	for _, h := range rows {
		out = append(out, hostJSON(h))
	}
	body := map[string]any{"hosts": out}
	if next != "" {
		body["next_page_token"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

func hostRow(h *store.InventoryHost) []string {
	return []string{h.Hostname, h.ID, h.OS, h.Kernel, h.AgentVersion, timeCell(h.FirstSeen), timeCell(h.LastSeen),
		strconv.FormatInt(h.Volumes, 10), strconv.FormatInt(h.Misaligned, 10), timeCell(h.CertNotAfter),
		strconv.FormatUint(h.StoredBytesOn(time.Now()), 10), strconv.FormatUint(h.RecordsRejected, 10), strconv.FormatUint(h.QuotaRefusals, 10)}
}

// host is GET /api/v1/hosts/{host}: the agent with that id, else the
// (most recently seen) agent with that hostname, and its volumes.
func (a *API) host(w http.ResponseWriter, r *http.Request) {
	if err := a.detail(r); err != nil {
		a.fail(w, r, err)
		return
	}
	h, err := a.st.FindHost(r.Context(), r.PathValue("host"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	vols := []map[string]any{}
	q := store.VolumeQuery{VolumeFilter: store.VolumeFilter{{Col: "agent_id", Op: store.OpEq, Value: h.ID}}, Sort: "mount_point", WithGeometry: true}
	err = a.st.QueryVolumes(r.Context(), q, func(v *store.InventoryVolume) error {
		obj, err := volumeItem(v)
		if err != nil {
			return err
		}
		vols = append(vols, obj)
		return nil
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Host
		Volumes []map[string]any `json:"volumes"`
	}{hostJSON(h), vols})
}
