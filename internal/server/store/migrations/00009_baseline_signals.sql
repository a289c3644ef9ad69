-- Degradation the median cannot see (issue 15): the evaluator judges every
-- probe run on its median, its p99, its mean and its achieved rate against
-- the IOPS cap it ran under, each against its own history:
--
--   probe_results.iops_cap      the run's IOPS cap (0: uncapped), as the
--                               agent reported it.
--   baseline_states.signal      what the state is about: median, p99, mean
--                               or rate (degraded on the rate alone, the
--                               median steady: throttled).
--   baseline_states.detail      the same in words ("p99 ×40 vs history",
--                               "rate 20/50 IOPS, …").
--   baseline_states.p99_ratio,  the last run's p99, mean and rate shortfall
--   mean_ratio, rate_ratio      (cap over achieved) over their histories
--                               (0: not trusted yet or not carried).

-- +goose Up
ALTER TABLE probe_results ADD COLUMN iops_cap DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE baseline_states ADD COLUMN signal TEXT NOT NULL DEFAULT 'median';
ALTER TABLE baseline_states ADD COLUMN detail TEXT NOT NULL DEFAULT '';
ALTER TABLE baseline_states ADD COLUMN p99_ratio DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE baseline_states ADD COLUMN mean_ratio DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE baseline_states ADD COLUMN rate_ratio DOUBLE PRECISION NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE baseline_states DROP COLUMN rate_ratio;
ALTER TABLE baseline_states DROP COLUMN mean_ratio;
ALTER TABLE baseline_states DROP COLUMN p99_ratio;
ALTER TABLE baseline_states DROP COLUMN detail;
ALTER TABLE baseline_states DROP COLUMN signal;
ALTER TABLE probe_results DROP COLUMN iops_cap;
