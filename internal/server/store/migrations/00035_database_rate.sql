-- Attribution by the database's and the device's own rates (issue 24): each
-- volume, source and operation keeps the history of its rate (operations
-- per second of each interval judged while the operation was not
-- degraded), so that a regression can say whether the database asked more
-- of the volume (load) or the volume delivered less than the database
-- asked (a throughput ceiling: a throttle, or the device at capacity).
--
--   database_states.rate_history  the evaluator's encoded rate history;
--                                 NULL until the first interval after
--                                 this migration (the history starts
--                                 empty and is learnt again).
--
--   probe_results.busy_*          what the probe's device did in the busy
--                                 guard's window before the run
--                                 (plumbline.v1.DeviceActivity): the window,
--                                 reads and writes completed, their sectors,
--                                 io_ticks and time_in_queue (ns). A run the
--                                 guard skipped is the attribution's witness
--                                 of what kept the device busy. Window 0:
--                                 not reported (older agents, guard off).
--   baseline_states.device_history the evaluator's history of the device's
--                                 operations per second in the guard's
--                                 window before the kind's runs that ran
--                                 (its usual rate); NULL until learnt.
--
-- Same conventions as 00001.

-- +goose Up
ALTER TABLE database_states ADD COLUMN rate_history BYTEA;
ALTER TABLE probe_results ADD COLUMN busy_window_ns BIGINT NOT NULL DEFAULT 0;
ALTER TABLE probe_results ADD COLUMN busy_ios BIGINT NOT NULL DEFAULT 0;
ALTER TABLE probe_results ADD COLUMN busy_sectors BIGINT NOT NULL DEFAULT 0;
ALTER TABLE probe_results ADD COLUMN busy_ticks_ns BIGINT NOT NULL DEFAULT 0;
ALTER TABLE probe_results ADD COLUMN busy_queue_ns BIGINT NOT NULL DEFAULT 0;
ALTER TABLE baseline_states ADD COLUMN device_history BYTEA;

-- +goose Down
ALTER TABLE baseline_states DROP COLUMN device_history;
ALTER TABLE probe_results DROP COLUMN busy_queue_ns;
ALTER TABLE probe_results DROP COLUMN busy_ticks_ns;
ALTER TABLE probe_results DROP COLUMN busy_sectors;
ALTER TABLE probe_results DROP COLUMN busy_ios;
ALTER TABLE probe_results DROP COLUMN busy_window_ns;
ALTER TABLE database_states DROP COLUMN rate_history;
