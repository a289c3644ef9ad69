-- The validity of the client certificate each agent presented at its last
-- Hello (every new connection starts with one, so a renewed certificate
-- shows at the agent's next connection): Unix nanoseconds, 0 when the
-- agent connected without a certificate (insecure mode) or before this
-- migration. The exporter turns them into
-- plumbline_agent_client_certificate_{issued,expiry}_timestamp_seconds and
-- PlumblineAgentCertificateExpiring warns while renewal has not happened.

-- +goose Up
ALTER TABLE agents ADD COLUMN cert_not_before_ns BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN cert_not_after_ns BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE agents DROP COLUMN cert_not_after_ns;
ALTER TABLE agents DROP COLUMN cert_not_before_ns;
