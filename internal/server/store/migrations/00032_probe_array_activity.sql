-- Rebuild-aware baselines (issue 25, section 2): a probe run records the md
-- arrays under its volume that ran a sync action at its start or end.
--
--   probe_results.array_activity  the run's mark: a JSON list of
--                                 {device, action, done_sectors,
--                                 total_sectors, speed_bytes_per_second}
--                                 (store.ArrayActivity); NULL when no array
--                                 under the volume ran an action. The
--                                 evaluator keeps a rebuild's runs out of
--                                 the volume's history.
--
-- Same conventions as 00001.

-- +goose Up
ALTER TABLE probe_results ADD COLUMN array_activity TEXT;

-- +goose Down
ALTER TABLE probe_results DROP COLUMN array_activity;
