#!/usr/bin/env bash
# Run Plumbline on this host with embedded defaults and no configuration.
# Until the server lands, that is the agent's one-shot inspection of every
# mounted block-backed file system.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./bin/agent inspect "$@"
