package config

import (
	"fmt"
	"slices"

	"github.com/plumbline/plumbline/internal/policy"
)

// Origins say where each merged key came from: "local", "central",
// "central (enforced)", "local + central" (maintenance windows) or
// "none".
type Origins map[string]string

// Merge is the agent's effective configuration: its local file local
// (loaded, defaults applied) with the central policy's fragment (nil:
// none) by the rule in internal/policy's package comment:
//
//	key                  local set   central set   result
//	probes               yes         yes           local, or central if enforced
//	probes               no          yes           central
//	declared_devices     as probes
//	databases            as probes
//	maintenance_windows  any         any           local then central (all apply)
//	intervals.*          any         yes           central (as the Hello answer)
//	everything else      -           -             local (central cannot set it)
//
// A local list is "set" when it has an entry.
func Merge(local Agent, central *policy.Fragment) (Agent, Origins) {
	eff := local
	o := Origins{}
	if central == nil {
		central = &policy.Fragment{}
	}
	enforced := func(k string) bool { return slices.Contains(central.Enforce, k) }
	pick := func(key string, localSet, centralSet bool, useCentral func()) {
		switch {
		case centralSet && (!localSet || enforced(key)):
			useCentral()
			o[key] = "central"
			if enforced(key) {
				o[key] = "central (enforced)"
			}
		case localSet:
			o[key] = "local"
		default:
			o[key] = "none"
		}
	}
	pick(policy.KeyProbes, len(local.Probes) > 0, len(central.Probes) > 0, func() {
		eff.Probes = slices.Clone(central.Probes)
	})
	pick(policy.KeyDeclaredDevices, len(local.DeclaredDevices) > 0, len(central.DeclaredDevices) > 0, func() {
		eff.DeclaredDevices = slices.Clone(central.DeclaredDevices)
	})
	pick(policy.KeyDatabases, len(local.Databases) > 0, len(central.Databases) > 0, func() {
		eff.Databases = slices.Clone(central.Databases)
	})
	eff.MaintenanceWindows = append(slices.Clone(local.MaintenanceWindows), central.MaintenanceWindows...)
	switch {
	case len(local.MaintenanceWindows) > 0 && len(central.MaintenanceWindows) > 0:
		o["maintenance_windows"] = "local + central"
	case len(central.MaintenanceWindows) > 0:
		o["maintenance_windows"] = "central"
	case len(local.MaintenanceWindows) > 0:
		o["maintenance_windows"] = "local"
	}
	o["intervals"] = "local"
	if d := central.Intervals.GeometryRefresh; d > 0 {
		eff.Intervals.GeometryRefresh = d
		o["intervals"] = "central"
	}
	if d := central.Intervals.Report; d > 0 {
		eff.Intervals.Report = d
		o["intervals"] = "central"
	}
	if d := central.Intervals.MemberIO; d > 0 {
		eff.Intervals.MemberIO = d
		o["intervals"] = "central"
	}
	return WithDefaults(eff), o
}

// Print is the effective configuration as YAML, headed by a comment
// saying where each merged key came from.
func Print(eff Agent, o Origins, sources []string) ([]byte, error) {
	b, err := policy.MarshalYAML(eff)
	if err != nil {
		return nil, fmt.Errorf("effective config: %w", err)
	}
	head := "# The agent's effective configuration: its file merged with central policy.\n"
	if len(sources) > 0 {
		head += fmt.Sprintf("# Central policy entries: %v\n", sources)
	} else {
		head += "# No central policy (none received yet, or none matches this host).\n"
	}
	for _, k := range []string{policy.KeyProbes, policy.KeyDeclaredDevices, policy.KeyDatabases, "maintenance_windows", "intervals"} {
		if v, ok := o[k]; ok {
			head += fmt.Sprintf("#   %-20s %s\n", k+":", v)
		}
	}
	return append([]byte(head), b...), nil
}
