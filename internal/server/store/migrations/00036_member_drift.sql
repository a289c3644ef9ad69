-- The slow member's second path: the member judge's CUSUM of a member's
-- log await ratio to its siblings (internal/server/members), which names a
-- member that is a little slower than its siblings in interval after
-- interval — one that stalls a few percent of its operations — where no
-- single interval shows it past the noise.
--
--   member_states.drift     the sum (0: at or below the reference)
--   member_states.drift_ns  the start of the interval it last rose from 0
--                           (0 while the sum is 0)
--
-- Same conventions as 00001.

-- +goose Up
ALTER TABLE member_states ADD COLUMN drift DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE member_states ADD COLUMN drift_ns BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE member_states DROP COLUMN drift_ns;
ALTER TABLE member_states DROP COLUMN drift;
