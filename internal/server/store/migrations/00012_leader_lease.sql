-- Several server replicas on one PostgreSQL (issue 14): each background
-- loop (the baseline evaluator, the inventory projection) runs on one
-- replica at a time, the holder of the loop's lease.
--
--   leader_lease.name        the loop ("evaluator", "inventory").
--   leader_lease.holder      the replica holding it (host, process, random).
--   leader_lease.epoch       the fencing token: one more at every change of
--                            holder, never less. The loop's write
--                            transactions read it (FOR KEY SHARE) and are
--                            refused when it moved past theirs.
--   leader_lease.expires_us  when the lease lapses unless renewed, in Unix
--                            microseconds of the database's clock (the
--                            replicas' clocks are never compared).
--
-- On SQLite (one server) the table stays empty: the server leads locally.

-- +goose Up
CREATE TABLE leader_lease (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    epoch      BIGINT NOT NULL CHECK (epoch >= 0),
    expires_us BIGINT NOT NULL
);

-- +goose Down
DROP TABLE leader_lease;
