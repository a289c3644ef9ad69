-- Central policy (issue 14 §2): what each agent last told the server about
-- its policy, for the policy API (GET /api/v1/hosts/{host}/policy) on every
-- replica and across restarts:
--
--   labels            the agent's labels as a JSON object (Hello,
--                     WatchPolicy): what policy selectors match.
--   effective_config  the configuration the agent runs with (YAML, its
--                     file merged with the central policy), '' until its
--                     first WatchPolicy.
--   applied_digest    the hex SHA-256 of the central policy it runs ('' for
--                     none).
--   reported_ns       when it said so last.

-- +goose Up
CREATE TABLE agent_policy (
    agent_id         TEXT PRIMARY KEY,
    labels           TEXT NOT NULL,
    effective_config TEXT NOT NULL,
    applied_digest   TEXT NOT NULL,
    reported_ns      BIGINT NOT NULL
);

-- +goose Down
DROP TABLE agent_policy;
