-- Enrollment and certificate rotation (issue 14 §1, README "Enrollment").
--
-- join_tokens: the tokens `server token create` made. The secret is kept
-- only as its SHA-256 (hex); token_id is the public half of the token.
-- A token enrolls at most max_uses agents until expires_ns; revoked_ns
-- (0: not revoked) ends it early. labels is a JSON object given to every
-- agent the token enrolls.
--
-- enrolled_agents: the agents this server's CA certified. serial is the
-- certificate the agent holds now (hex), prev_serial the one before its
-- last renewal (its connections made with it stay valid until they are
-- closed or it expires); any other certificate naming the agent is
-- refused. revoked_ns (0: not revoked) refuses every certificate of the
-- agent and its renewal; enrolling the id again (a new token) issues a
-- new serial. Same conventions as 00001 (times in Unix nanoseconds).

-- +goose Up
CREATE TABLE join_tokens (
    token_id      TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    labels        TEXT NOT NULL DEFAULT '{}',
    max_uses      BIGINT NOT NULL CHECK (max_uses >= 1),
    uses          BIGINT NOT NULL DEFAULT 0 CHECK (uses >= 0),
    created_ns    BIGINT NOT NULL,
    expires_ns    BIGINT NOT NULL,
    revoked_ns    BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE enrolled_agents (
    agent_id     TEXT PRIMARY KEY,
    token_id     TEXT NOT NULL,
    labels       TEXT NOT NULL DEFAULT '{}',
    serial       TEXT NOT NULL,
    prev_serial  TEXT NOT NULL DEFAULT '',
    not_after_ns BIGINT NOT NULL,
    enrolled_ns  BIGINT NOT NULL,
    renewed_ns   BIGINT NOT NULL DEFAULT 0,
    revoked_ns   BIGINT NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE enrolled_agents;
DROP TABLE join_tokens;
