// Package policy is central policy: the server's configuration holds
// entries that select hosts (by host name glob and labels) and give them
// a fragment of the agent configuration — probe schedules, declared
// devices, maintenance windows, intervals. The server resolves the
// fragment for each agent (Resolve) and sends it in Hello and through
// WatchPolicy; the agent merges it with its own file (config.Merge).
//
// Precedence when several entries match a host: entries are read in the
// order of the file; for probes, declared_devices and each interval, the
// first matching entry that sets the key gives it (with that entry's
// enforce); the same for databases; maintenance windows of every matching
// entry apply.
//
// The merge rule on the agent (config.Merge): a key of the local file wins over
// the central one, unless the central entry that gave it enforces it;
// maintenance windows of both apply (a window only ever holds probes back);
// intervals are the server's when it states them, as the Hello answer's
// always were.
package policy

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/maintenance"
	"github.com/plumbline/plumbline/internal/strictyaml"
)

// The keys an entry may enforce.
const (
	KeyProbes          = "probes"
	KeyDeclaredDevices = "declared_devices"
	KeyDatabases       = "databases"
)

// EnforceableKeys lists the keys `enforce` accepts.
func EnforceableKeys() []string { return []string{KeyProbes, KeyDeclaredDevices, KeyDatabases} }

// Entry is one policy entry of the server's configuration (the policies
// key).
type Entry struct {
	// Name identifies the entry (AgentPolicy.sources, the API, logs).
	Name   string   `yaml:"name"`
	Select Selector `yaml:"select"`
	Policy Fragment `yaml:"policy"`
}

// Selector picks hosts: every glob and label given must match; an empty
// selector matches every host.
type Selector struct {
	// Hosts are path.Match globs of the host name (Hello's host.hostname,
	// else the agent id); any one matching is enough.
	Hosts []string `yaml:"hosts,omitempty" json:"hosts,omitempty"`
	// Labels: each key must be a label of the host whose value matches
	// the glob (path.Match; "*" asks only that the label exists).
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
}

// Fragment is the part of an agent configuration central policy gives.
// Its keys are the agent config's, with the same defaults and checks.
type Fragment struct {
	// Enforce lists the keys (probes, declared_devices) that win over the
	// agent's local file.
	Enforce            []string                   `yaml:"enforce,omitempty"`
	Probes             []agentkeys.ProbeSchedule  `yaml:"probes,omitempty"`
	DeclaredDevices    []agentkeys.DeclaredDevice `yaml:"declared_devices,omitempty"`
	MaintenanceWindows []maintenance.Window       `yaml:"maintenance_windows,omitempty"`
	Intervals          Intervals                  `yaml:"intervals,omitempty"`
	// Databases are the database sources (an agent older than this key
	// refuses a fragment that sets it, and keeps what it ran).
	Databases []agentkeys.DatabaseSource `yaml:"databases,omitempty"`
}

// Intervals are the agent's periods; 0: not set by this fragment.
type Intervals struct {
	GeometryRefresh time.Duration `yaml:"geometry_refresh,omitempty"`
	Report          time.Duration `yaml:"report,omitempty"`
	// MemberIO is how often the agent samples the member devices under
	// its volumes (/proc/diskstats, Record.member_io).
	MemberIO time.Duration `yaml:"member_io,omitempty"`
}

// Facts are what selectors match of one host.
type Facts struct {
	Hostname string
	// Labels have canonical keys (labels.Canonical): a selector's keys
	// match them in any case.
	Labels map[string]string
}

// ErrInvalid wraps every validation error.
var ErrInvalid = errors.New("invalid policy")

// Validate checks every entry: names unique, selectors well-formed, and
// each fragment valid as agent configuration.
func Validate(entries []Entry) error {
	var errs []error
	seen := map[string]bool{}
	for i, e := range entries {
		w := fmt.Sprintf("policies[%d]", i)
		switch {
		case e.Name == "" || len(e.Name) > 64 || strings.ContainsAny(e.Name, " \t\n"):
			errs = append(errs, fmt.Errorf("%s.name %q: want 1 to 64 characters without spaces", w, e.Name))
		case seen[e.Name]:
			errs = append(errs, fmt.Errorf("%s.name %q: used twice", w, e.Name))
		}
		seen[e.Name] = true
		if err := e.Select.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.select: %w", w, err))
		}
		if err := e.Policy.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.policy: %w", w, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// Validate checks the globs and label keys.
func (s Selector) Validate() error {
	for i, g := range s.Hosts {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return fmt.Errorf("hosts[%d] %q: want a host name or glob (path.Match syntax)", i, g)
		}
	}
	if len(s.Labels) > labels.MaxLabels {
		return fmt.Errorf("labels: %d, want at most %d", len(s.Labels), labels.MaxLabels)
	}
	seen := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		if err := labels.CheckKey(k); err != nil {
			return fmt.Errorf("labels: %w", err)
		}
		if other, dup := seen[labels.CanonicalKey(k)]; dup {
			return fmt.Errorf("labels: %q and %q: keys are case-insensitive, want one of them", other, k)
		}
		seen[labels.CanonicalKey(k)] = k
		g := s.Labels[k]
		if _, err := path.Match(g, ""); err != nil || labels.CheckText(g) != nil {
			return fmt.Errorf("labels.%s %q: want a value or glob (path.Match syntax) of printable text", k, g)
		}
	}
	return nil
}

// Matches reports whether the selector picks the host.
func (s Selector) Matches(f Facts) bool {
	if len(s.Hosts) > 0 && !slices.ContainsFunc(s.Hosts, func(g string) bool { ok, _ := path.Match(g, f.Hostname); return ok }) {
		return false
	}
	for k, g := range s.Labels {
		v, ok := f.Labels[labels.CanonicalKey(k)]
		if !ok {
			return false
		}
		if m, _ := path.Match(g, v); !m {
			return false
		}
	}
	return true
}

// Validate checks the fragment as the agent will: its keys through the
// checks the agent's configuration runs on them (agentkeys; defaults
// applied).
func (f Fragment) Validate() error {
	var errs []error
	for i, k := range f.Enforce {
		if !slices.Contains(EnforceableKeys(), k) {
			errs = append(errs, fmt.Errorf("enforce[%d] %q: want %s", i, k, strings.Join(EnforceableKeys(), " or ")))
		}
	}
	if d := f.Intervals.GeometryRefresh; d != 0 && d < time.Second {
		errs = append(errs, fmt.Errorf("intervals.geometry_refresh %s: want at least 1s", d))
	}
	if d := f.Intervals.Report; d != 0 && d < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("intervals.report %s: want at least 100ms", d))
	}
	if d := f.Intervals.MemberIO; d != 0 && (d < agentkeys.MinMemberIOInterval || d > agentkeys.MaxMemberIOInterval) {
		errs = append(errs, fmt.Errorf("intervals.member_io %s: want %s to %s", d, agentkeys.MinMemberIOInterval, agentkeys.MaxMemberIOInterval))
	}
	errs = append(errs, agentkeys.ValidateDeclared(f.DeclaredDevices)...)
	errs = append(errs, agentkeys.ValidateProbes(agentkeys.WithDefaults(f.Probes))...)
	errs = append(errs, agentkeys.ValidateDatabases(agentkeys.WithDatabaseDefaults(f.Databases))...)
	for i, w := range f.MaintenanceWindows {
		if err := w.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("maintenance_windows[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Resolved is the policy for one host.
type Resolved struct {
	Fragment Fragment
	// Sources names the matching entries, in order.
	Sources []string
	// YAML is Fragment marshalled (empty when nothing matched), Digest its
	// SHA-256.
	YAML   []byte
	Digest []byte
}

// Resolve merges the entries that match f by the precedence rule in the
// package comment.
func Resolve(entries []Entry, f Facts) (Resolved, error) {
	f.Labels = labels.Fold(f.Labels)
	var out Fragment
	var r Resolved
	enforce := map[string]bool{}
	take := func(key string, e Entry, set bool) bool {
		if !set {
			return false
		}
		enforce[key] = slices.Contains(e.Policy.Enforce, key)
		return true
	}
	for _, e := range entries {
		if !e.Select.Matches(f) {
			continue
		}
		r.Sources = append(r.Sources, e.Name)
		p := e.Policy
		if out.Probes == nil && take(KeyProbes, e, len(p.Probes) > 0) {
			out.Probes = p.Probes
		}
		if out.DeclaredDevices == nil && take(KeyDeclaredDevices, e, len(p.DeclaredDevices) > 0) {
			out.DeclaredDevices = p.DeclaredDevices
		}
		if out.Databases == nil && take(KeyDatabases, e, len(p.Databases) > 0) {
			out.Databases = p.Databases
		}
		out.MaintenanceWindows = append(out.MaintenanceWindows, p.MaintenanceWindows...)
		if out.Intervals.GeometryRefresh == 0 {
			out.Intervals.GeometryRefresh = p.Intervals.GeometryRefresh
		}
		if out.Intervals.Report == 0 {
			out.Intervals.Report = p.Intervals.Report
		}
		if out.Intervals.MemberIO == 0 {
			out.Intervals.MemberIO = p.Intervals.MemberIO
		}
	}
	for _, k := range EnforceableKeys() {
		if enforce[k] {
			out.Enforce = append(out.Enforce, k)
		}
	}
	r.Fragment = out
	if len(r.Sources) > 0 {
		b, err := MarshalYAML(out)
		if err != nil {
			return Resolved{}, fmt.Errorf("policy: marshal: %w", err)
		}
		sum := sha256.Sum256(b)
		r.YAML, r.Digest = b, sum[:]
	}
	return r, nil
}

// MarshalYAML is v as YAML, indented by two spaces as the examples are
// (a resolved fragment; the agent's effective configuration).
func MarshalYAML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// ParseFragment decodes and validates a fragment as the agent receives it.
func ParseFragment(b []byte) (Fragment, error) {
	var f Fragment
	if err := strictyaml.Decode(b, &f); err != nil {
		return Fragment{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := f.Validate(); err != nil {
		return Fragment{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return f, nil
}
