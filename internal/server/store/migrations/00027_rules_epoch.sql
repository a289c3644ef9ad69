-- The judged record's rules epoch: align.RulesVersion, the number of the
-- shipped rules it was judged under (0: before there were epochs). The
-- judge's loop never rewrites a record of a higher epoch than its own,
-- so a replica still running older rules (a rolling upgrade) leaves the
-- newer replicas' judgements alone.

-- +goose Up
ALTER TABLE inventory_volumes ADD COLUMN rules_epoch BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE inventory_volumes DROP COLUMN rules_epoch;
