-- The geometry probe in the inventory (issue 13): what the judged
-- alignment says of the stripe unit's origin and of the measured split
-- cost, as query columns, so that the API filters on the source and the
-- CSV reads columns rather than every volume's stored geometry.
--
--   stripe_unit_source            where the judged stripe unit came from
--                                 (declared, sysfs, kernel-hint, measured,
--                                 ...; '' when none is known)
--   stripe_unit_confidence        the stripe-scan measurement's confidence
--                                 (0: none)
--   measured_split_cost_seconds   the measured extra latency of one split
--   (_low_, _high_)               I/O and its interval (-1: not measured)
--   measured_penalty_8k, _64k     that cost times the predicted split of
--                                 each I/O size (-1: not measured)
--
-- Every row is derived again at the next sync (sequence -1).

-- +goose Up
ALTER TABLE inventory_volumes ADD COLUMN stripe_unit_source TEXT NOT NULL DEFAULT '';
ALTER TABLE inventory_volumes ADD COLUMN stripe_unit_confidence DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE inventory_volumes ADD COLUMN measured_split_cost_seconds DOUBLE PRECISION NOT NULL DEFAULT -1;
ALTER TABLE inventory_volumes ADD COLUMN measured_split_cost_low_seconds DOUBLE PRECISION NOT NULL DEFAULT -1;
ALTER TABLE inventory_volumes ADD COLUMN measured_split_cost_high_seconds DOUBLE PRECISION NOT NULL DEFAULT -1;
ALTER TABLE inventory_volumes ADD COLUMN measured_penalty_8k DOUBLE PRECISION NOT NULL DEFAULT -1;
ALTER TABLE inventory_volumes ADD COLUMN measured_penalty_64k DOUBLE PRECISION NOT NULL DEFAULT -1;
UPDATE inventory_volumes SET sequence = -1;

-- +goose Down
ALTER TABLE inventory_volumes DROP COLUMN measured_penalty_64k;
ALTER TABLE inventory_volumes DROP COLUMN measured_penalty_8k;
ALTER TABLE inventory_volumes DROP COLUMN measured_split_cost_high_seconds;
ALTER TABLE inventory_volumes DROP COLUMN measured_split_cost_low_seconds;
ALTER TABLE inventory_volumes DROP COLUMN measured_split_cost_seconds;
ALTER TABLE inventory_volumes DROP COLUMN stripe_unit_confidence;
ALTER TABLE inventory_volumes DROP COLUMN stripe_unit_source;
