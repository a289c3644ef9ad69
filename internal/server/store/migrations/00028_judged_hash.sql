-- The judged record's hash (judgedHash: everything the judge decided,
-- not where the volume lives nor when it was judged). A snapshot that
-- repeats the previous one judges to the same hash: its ingest moves the
-- record's sequence and observed time on and rewrites nothing else
-- ('': not known, the next snapshot rewrites the record).

-- +goose Up
ALTER TABLE inventory_volumes ADD COLUMN judged_hash TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE inventory_volumes DROP COLUMN judged_hash;
