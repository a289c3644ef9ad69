-- Agent ids a join token cannot enroll (internal/server/store/reserve.go): ids an
-- operator reserved (`server agent reserve ID`) for an agent with a
-- certificate of its own PKI, and ids the server saw presenting a
-- verified certificate that enrollment did not issue. An enrollment under
-- a reserved id is refused, saying how to release it.

-- +goose Up
CREATE TABLE reserved_agent_ids (
    agent_id    TEXT PRIMARY KEY,
    source      TEXT NOT NULL,
    reason      TEXT NOT NULL,
    reserved_ns BIGINT NOT NULL
);

-- +goose Down
DROP TABLE reserved_agent_ids;
