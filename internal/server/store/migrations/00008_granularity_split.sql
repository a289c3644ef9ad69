-- The split-I/O figure by cause (issue 11 §4). split_fraction_8k/_64k
-- now hold the offset-caused split: what the volume's data offset adds
-- beyond what an aligned offset would split (0 on an aligned volume;
-- re-partitioning removes it). The new granularity columns hold the split
-- at an aligned offset, from I/Os placed on a grid finer than their size
-- (the allocation unit): no misalignment, and no re-partitioning removes
-- it. -1: unknown (no stripe unit or offset known), as for the split
-- columns. The query tables are derived from the stored geometry, so
-- every row is derived again at the next sync (a stored sequence of -1
-- never matches). Same conventions as 00001.

-- +goose Up
ALTER TABLE inventory_volumes ADD COLUMN granularity_split_fraction_8k DOUBLE PRECISION NOT NULL DEFAULT -1;
ALTER TABLE inventory_volumes ADD COLUMN granularity_split_fraction_64k DOUBLE PRECISION NOT NULL DEFAULT -1;
UPDATE inventory_volumes SET sequence = -1;

-- +goose Down
ALTER TABLE inventory_volumes DROP COLUMN granularity_split_fraction_64k;
ALTER TABLE inventory_volumes DROP COLUMN granularity_split_fraction_8k;
