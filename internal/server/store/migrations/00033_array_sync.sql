-- Rebuild-aware baselines (issue 25, section 2): the sync action of each md
-- array under a judged volume, as its latest geometry snapshot stated it,
-- for the exporter's plumbline_volume_raid_sync_progress_ratio and
-- plumbline_volume_raid_sync_speed_bytes_per_second (series only while an
-- action runs):
--
--   inventory_arrays.sync_action         md/sync_action when an action
--                                        runs (resync, recover, reshape,
--                                        check, repair); '' when idle,
--                                        frozen or not stated
--   inventory_arrays.sync_done_sectors   md/sync_completed (512-byte
--   inventory_arrays.sync_total_sectors  sectors); total 0: not stated
--   inventory_arrays.sync_speed_bps      md/sync_speed in bytes per second
--                                        (0: not stated)
--
-- Every row is derived again at the next sync (sequence -1).
-- Same conventions as 00001.

-- +goose Up
ALTER TABLE inventory_arrays ADD COLUMN sync_action TEXT NOT NULL DEFAULT '';
ALTER TABLE inventory_arrays ADD COLUMN sync_done_sectors BIGINT NOT NULL DEFAULT 0;
ALTER TABLE inventory_arrays ADD COLUMN sync_total_sectors BIGINT NOT NULL DEFAULT 0;
ALTER TABLE inventory_arrays ADD COLUMN sync_speed_bps BIGINT NOT NULL DEFAULT 0;
UPDATE inventory_volumes SET sequence = -1;

-- +goose Down
ALTER TABLE inventory_arrays DROP COLUMN sync_speed_bps;
ALTER TABLE inventory_arrays DROP COLUMN sync_total_sectors;
ALTER TABLE inventory_arrays DROP COLUMN sync_done_sectors;
ALTER TABLE inventory_arrays DROP COLUMN sync_action;
