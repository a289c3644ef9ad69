-- A record's identity survives a spool reset (issue 11 §1).
--
-- An agent's spool has an incarnation: a random id created with the spool
-- and kept in it (internal/agent/spool). Sequence numbers count within one
-- incarnation, so a record is identified by (agent, incarnation, agent
-- sequence), and a wiped spool, or a second host sharing one certificate,
-- starts a new incarnation whose sequence 1 is not the old sequence 1.
-- Agents from before incarnations send none: their incarnation is ''.
--
-- records.sequence becomes the server's own per-agent sequence: assigned
-- 1, 2, 3, ... in the order records are stored (under the agent's row
-- lock), so it has no gaps, and everything keyed on it (volumes,
-- probe_results, baseline watermarks, inventory history marks) keeps its
-- meaning: "what arrived from this agent, in order". agents.high_water is
-- its largest value. The dedup high-water mark an agent is told about is
-- per incarnation, in agent_incarnations. Same conventions as 00001.

-- +goose Up
ALTER TABLE records ADD COLUMN incarnation TEXT NOT NULL DEFAULT '';
-- The agent's sequence within its incarnation.
ALTER TABLE records ADD COLUMN agent_sequence BIGINT NOT NULL DEFAULT 0;
UPDATE records SET agent_sequence = sequence;
-- The dedup: one row per (agent, incarnation, agent sequence).
CREATE UNIQUE INDEX records_identity ON records (agent_id, incarnation, agent_sequence);

-- Every incarnation an agent has reported from.
CREATE TABLE agent_incarnations (
    agent_id      TEXT NOT NULL REFERENCES agents (agent_id),
    incarnation   TEXT NOT NULL,
    -- The dedup high-water mark of this incarnation: every agent sequence
    -- 1..high_water of it is settled (stored, rejected, or declared dropped).
    high_water    BIGINT NOT NULL DEFAULT 0 CHECK (high_water >= 0),
    first_seen_ns BIGINT NOT NULL,
    last_seen_ns  BIGINT NOT NULL,
    PRIMARY KEY (agent_id, incarnation)
);
INSERT INTO agent_incarnations (agent_id, incarnation, high_water, first_seen_ns, last_seen_ns)
SELECT agent_id, '', high_water, first_seen_ns, last_seen_ns FROM agents;
-- Gaps the '' incarnation still has are filled by later arrivals with new
-- server sequences above the largest one.
UPDATE agents SET high_water = COALESCE((SELECT MAX(r.sequence) FROM records r WHERE r.agent_id = agents.agent_id), 0);

-- The incarnation that said Hello last ('' for agents from before).
ALTER TABLE agents ADD COLUMN incarnation TEXT NOT NULL DEFAULT '';
-- The digest (hex) the agent gave with the geometry snapshot the server
-- holds for it; '' when none or unknown. Hello answers with it, and an
-- agent whose current snapshot differs sends it again.
ALTER TABLE agents ADD COLUMN geometry_digest TEXT NOT NULL DEFAULT '';
-- Two live incarnations on one identity: how often an incarnation that a
-- newer one had superseded spoke again, and when it last did (0: never).
ALTER TABLE agents ADD COLUMN identity_conflicts BIGINT NOT NULL DEFAULT 0 CHECK (identity_conflicts >= 0);
ALTER TABLE agents ADD COLUMN identity_conflict_ns BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE agents DROP COLUMN identity_conflict_ns;
ALTER TABLE agents DROP COLUMN identity_conflicts;
ALTER TABLE agents DROP COLUMN geometry_digest;
ALTER TABLE agents DROP COLUMN incarnation;
DROP TABLE agent_incarnations;
DROP INDEX records_identity;
ALTER TABLE records DROP COLUMN agent_sequence;
ALTER TABLE records DROP COLUMN incarnation;
