package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// raidRowY is where volume-detail's RAID row starts (below the Database
// row).
const raidRowY = databaseRowY + 18

// withRAIDRow adds volume-detail's "RAID" row: the sync action an md array
// under the volume runs, how far along and how fast (PlumblineRAIDRebuilding,
// PlumblineRAIDRebuildStalled), and the members of the host's arrays the
// sibling judge names slow (PlumblineRAIDMemberSlow). Empty for a volume
// on no md array and a host with no slow member.
func withRAIDRow(d *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	y := uint32(raidRowY)
	sel := `{host=~"$host",mount_point=~"$mount_point"}`
	d.WithRow(dashboard.NewRowBuilder("RAID").Id(50).GridPos(grid(0, y, 24, 1)))
	d.WithPanel(timeseries.NewPanelBuilder().Id(51).Title("md sync progress").
		Description("Share done of the sync action (resync, recover, reshape, check, repair) each md array under the volume runs, from md/sync_completed; the series is there only while an action runs. Probe runs made during a resync, recover or reshape do not teach the volume's history (its state reads rebuilding).").
		Datasource(datasource()).GridPos(grid(0, y+1, 12, 8)).
		WithTarget(query("A", `max by (device, action) (plumbline_volume_raid_sync_progress_ratio`+sel+`)`, "{{device}} {{action}}")).
		Unit("percentunit").
		Min(0).
		Max(1))
	d.WithPanel(timeseries.NewPanelBuilder().Id(52).Title("md sync speed").
		Description("Speed of the running sync action (md/sync_speed, the kernel's last 30 seconds). Flat at zero for an hour with progress unchanged: PlumblineRAIDRebuildStalled.").
		Datasource(datasource()).GridPos(grid(12, y+1, 12, 8)).
		WithTarget(query("A", `max by (device, action) (plumbline_volume_raid_sync_speed_bytes_per_second`+sel+`)`, "{{device}} {{action}}")).
		Unit("Bps"))
	d.WithPanel(table.NewPanelBuilder().Id(53).Title("Slow members on the host").
		Description("Members of the host's md arrays, mirrors, striped logical volumes and multipath devices that the sibling judge names slower than their siblings doing the same work, from the kernel's own /proc/diskstats accounting: the member's mean await over its siblings' median, by direction, with its by-id name and serial.").
		Datasource(datasource()).GridPos(grid(0, y+9, 24, 6)).
		WithTarget(tableQuery("A", `max by (array, kind, member, by_id, serial, direction) (plumbline_raid_member_slow_ratio{host=~"$host"})`)).
		OverrideByName("Ratio", []dashboard.DynamicConfigValue{{Id: "unit", Value: "suffix:×"}, {Id: "decimals", Value: 2}}).
		WithTransformation(transform("organize", map[string]any{"excludeByName": hidden(), "renameByName": map[string]any{"array": "Array", "kind": "Kind", "member": "Member", "by_id": "By id", "serial": "Serial", "direction": "Direction", "Value": "Ratio"}, "indexByName": map[string]any{"array": 0, "kind": 1, "member": 2, "by_id": 3, "serial": 4, "direction": 5, "Value": 6}})))
	return d
}
