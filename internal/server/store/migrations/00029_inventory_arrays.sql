-- The md arrays under each judged volume, as the judged record's readers
-- need them (the exporter's plumbline_volume_raid_members_missing), so
-- that no reader decodes the stored geometry for them:
--
--   inventory_arrays   one row per md array below an inventory volume
--                      whose raid_disks the kernel stated (sysfs): its
--                      device and how many of its raid_disks have no
--                      member device listed below it (0 or more).
--
-- Written with the volume's inventory row, removed with it. Every row is
-- derived again at the next sync (sequence -1), which fills the table.
-- Same conventions as 00001.

-- +goose Up
CREATE TABLE inventory_arrays (
    volume_id TEXT NOT NULL,
    device    TEXT NOT NULL,
    missing   INTEGER NOT NULL,
    PRIMARY KEY (volume_id, device)
);
UPDATE inventory_volumes SET sequence = -1;

-- +goose Down
DROP TABLE inventory_arrays;
