-- When a server replica last saw each agent connected (an open
-- WatchPolicy call, which an agent keeps open for its whole session):
-- Unix nanoseconds, 0 never. Every replica notes its own connected agents
-- every third of the down threshold (Store.MarkConnected), so an idle
-- agent — no probe schedule, a maintenance window — is up while
-- connected, and one that no replica holds a connection of is down once
-- neither this nor last_seen_ns is within the threshold. Kept apart from
-- last_seen_ns, which moves only with what the agent sends (the exporter
-- reads the volumes again when it moves).

-- +goose Up
ALTER TABLE agents ADD COLUMN connected_ns BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE agents DROP COLUMN connected_ns;
