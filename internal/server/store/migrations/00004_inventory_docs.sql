-- The inventory API's read side, precomputed at sync time (migration
-- 00003's tables stay the query tables):
--
--   inventory_docs        each inventory volume's JSON as a page lists it
--                         (the inspect shape, render.JSON, plus host, id and
--                         the derived columns; the baseline is added when
--                         read), so a page is a keyset query and a byte
--                         copy, not 100 protobuf decodes and JSON renders.
--                         Kept apart from inventory_volumes so that the
--                         summary's scans stay over narrow rows.
--   inventory_generation  one row, a counter moved in the same transaction
--                         as every change to the inventory tables (sync
--                         writes and removals, baseline states): what the
--                         API's summary cache is keyed on, across replicas.
--
-- One index per sort field of GET /api/v1/volumes (00003's five sort
-- indexes replaced), each the sort columns and volume_id like the keyset,
-- then the common filter columns (verdict, fs_type, raid_level, media,
-- data_offset_bytes, split_fraction_8k): a page walks its sort index and
-- tests those filters in the index, without a table lookup per row passed
-- over (a first page whose matches lie deep in the sort order: 67 -> 4 ms
-- on SQLite at 100,000 volumes). A page never sorts the filtered set.

-- +goose Up
CREATE TABLE inventory_docs (
    volume_id TEXT PRIMARY KEY,
    -- inventory_volumes.sequence the document was rendered from.
    sequence  BIGINT NOT NULL,
    doc       BYTEA NOT NULL
);
CREATE TABLE inventory_generation (
    id         INTEGER PRIMARY KEY,
    generation BIGINT NOT NULL
);
INSERT INTO inventory_generation (id, generation) VALUES (1, 1);
DROP INDEX inventory_volumes_host;
DROP INDEX inventory_volumes_verdict;
DROP INDEX inventory_volumes_split;
DROP INDEX inventory_volumes_offset;
DROP INDEX inventory_volumes_profile;
CREATE INDEX inventory_volumes_host ON inventory_volumes (hostname, mount_point, volume_id, verdict, fs_type, raid_level, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_verdict ON inventory_volumes (verdict, hostname, mount_point, volume_id, fs_type, raid_level, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_mount ON inventory_volumes (mount_point, volume_id, verdict, fs_type, raid_level, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_fs ON inventory_volumes (fs_type, volume_id, verdict, raid_level, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_raid ON inventory_volumes (raid_level, volume_id, verdict, fs_type, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_media ON inventory_volumes (media, volume_id, verdict, fs_type, raid_level, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_profile ON inventory_volumes (profile, volume_id, verdict, fs_type, raid_level, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_stripe ON inventory_volumes (stripe_unit_bytes, volume_id, verdict, fs_type, raid_level, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_offset ON inventory_volumes (data_offset_bytes, volume_id, verdict, fs_type, raid_level, media, split_fraction_8k);
CREATE INDEX inventory_volumes_au ON inventory_volumes (allocation_unit_bytes, volume_id, verdict, fs_type, raid_level, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_split ON inventory_volumes (split_fraction_8k, volume_id, verdict, fs_type, raid_level, media, data_offset_bytes);
CREATE INDEX inventory_volumes_split64 ON inventory_volumes (split_fraction_64k, volume_id, verdict, fs_type, raid_level, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_severity ON inventory_volumes (severity_rank, volume_id, verdict, fs_type, raid_level, media, data_offset_bytes, split_fraction_8k);
CREATE INDEX inventory_volumes_observed ON inventory_volumes (observed_ns, volume_id, verdict, fs_type, raid_level, media, data_offset_bytes, split_fraction_8k);
-- The summary's top offenders, in their order: a walk of the first rows,
-- not a sort of every volume with a split fraction above 0.
CREATE INDEX inventory_volumes_offenders ON inventory_volumes
    (split_fraction_8k DESC, split_fraction_64k DESC, severity_rank DESC, volume_id);
-- Rows derived before this migration have no document: the next full sync
-- derives every row again (a stored sequence of -1 never matches).
UPDATE inventory_volumes SET sequence = -1;

-- +goose Down
DROP INDEX inventory_volumes_offenders;
DROP INDEX inventory_volumes_observed;
DROP INDEX inventory_volumes_severity;
DROP INDEX inventory_volumes_split64;
DROP INDEX inventory_volumes_split;
DROP INDEX inventory_volumes_au;
DROP INDEX inventory_volumes_offset;
DROP INDEX inventory_volumes_stripe;
DROP INDEX inventory_volumes_profile;
DROP INDEX inventory_volumes_media;
DROP INDEX inventory_volumes_raid;
DROP INDEX inventory_volumes_fs;
DROP INDEX inventory_volumes_mount;
DROP INDEX inventory_volumes_verdict;
DROP INDEX inventory_volumes_host;
CREATE INDEX inventory_volumes_host ON inventory_volumes (hostname, mount_point, volume_id);
CREATE INDEX inventory_volumes_verdict ON inventory_volumes (verdict, hostname, mount_point, volume_id);
CREATE INDEX inventory_volumes_split ON inventory_volumes (split_fraction_8k, volume_id);
CREATE INDEX inventory_volumes_offset ON inventory_volumes (data_offset_bytes, volume_id);
CREATE INDEX inventory_volumes_profile ON inventory_volumes (profile, volume_id);
DROP TABLE inventory_generation;
DROP TABLE inventory_docs;
