-- One judged record per volume. Ingest's judge writes a volume's
-- inventory row (verdict, findings, split figures, profile, the page
-- document) in the transaction that stores the volume; the volumes table
-- keeps the geometry as received and no verdict of its own.
--
--   inventory_volumes.rules_version  the rules the row was judged under
--                                    (the judge re-judges rows of another
--                                    version; '' judges every row again)
--   inventory_volumes.judged_ns      when the row was last judged (a
--                                    re-judge moves it on; the exporter's
--                                    change check reads it)

-- +goose Up
ALTER TABLE inventory_volumes ADD COLUMN rules_version TEXT NOT NULL DEFAULT '';
ALTER TABLE inventory_volumes ADD COLUMN judged_ns BIGINT NOT NULL DEFAULT 0;
DROP INDEX volumes_verdict;
ALTER TABLE volumes DROP COLUMN verdict;
ALTER TABLE volumes DROP COLUMN data_offset_bytes;
ALTER TABLE volumes DROP COLUMN stripe_unit_bytes;
ALTER TABLE volumes DROP COLUMN split_fraction_8k;
ALTER TABLE volumes DROP COLUMN split_fraction_64k;

-- +goose Down
ALTER TABLE volumes ADD COLUMN split_fraction_64k DOUBLE PRECISION;
ALTER TABLE volumes ADD COLUMN split_fraction_8k DOUBLE PRECISION;
ALTER TABLE volumes ADD COLUMN stripe_unit_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE volumes ADD COLUMN data_offset_bytes BIGINT;
ALTER TABLE volumes ADD COLUMN verdict TEXT NOT NULL DEFAULT 'unknown' CHECK (verdict IN ('aligned', 'misaligned', 'unknown'));
CREATE INDEX volumes_verdict ON volumes (verdict);
ALTER TABLE inventory_volumes DROP COLUMN judged_ns;
ALTER TABLE inventory_volumes DROP COLUMN rules_version;
