-- Attribution by the database's own operation rate (issue 24): each
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
-- Same conventions as 00001.

-- +goose Up
ALTER TABLE database_states ADD COLUMN rate_history BYTEA;

-- +goose Down
ALTER TABLE database_states DROP COLUMN rate_history;
