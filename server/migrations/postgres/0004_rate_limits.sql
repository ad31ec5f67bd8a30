-- Rate limits several instances share (docs/instances.md): one row per limit and key, holding the
-- key's theoretical arrival time (GCRA, as the in-memory limiter of one process counts), in
-- milliseconds since the Unix epoch by the database's clock. A row whose time has passed is a
-- key at its full allowance and may be deleted.
CREATE TABLE rate_limits (
    key  TEXT PRIMARY KEY,
    tat  BIGINT NOT NULL
);
CREATE INDEX rate_limits_by_tat ON rate_limits (tat);
