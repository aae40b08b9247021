-- The pinned workspace (issue #4): model keys, the model meter's ledger, and
-- the red and green runs the platform witnessed. Times are Unix ms.

-- A key for the metered model endpoint. The key itself is derived from the
-- assignment's link token and the generation (see server/src/meter), so only
-- its hash is stored; revoking sets revoked_at, reissuing adds a generation.
CREATE TABLE model_keys (
    id            INTEGER PRIMARY KEY,
    assignment_id TEXT NOT NULL REFERENCES assignments (id),
    generation    INTEGER NOT NULL,
    key_hash      TEXT NOT NULL UNIQUE,
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER,
    UNIQUE (assignment_id, generation)
);

-- One row per call to the metered endpoint, forwarded or refused.
-- `refused` names the cap or rule that refused it (then nothing was
-- forwarded); `tokens_estimated` is 1 when the upstream sent no usage.
CREATE TABLE model_calls (
    id                INTEGER PRIMARY KEY,
    assignment_id     TEXT NOT NULL REFERENCES assignments (id),
    at                INTEGER NOT NULL,
    model             TEXT NOT NULL DEFAULT '',
    stream            INTEGER NOT NULL DEFAULT 0,
    request_bytes     INTEGER NOT NULL,
    response_bytes    INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    tokens_estimated  INTEGER NOT NULL DEFAULT 0,
    latency_ms        INTEGER NOT NULL DEFAULT 0,
    status            INTEGER NOT NULL,
    error             TEXT,
    refused           TEXT,
    request_sha256    TEXT NOT NULL,
    duplicate_of      INTEGER REFERENCES model_calls (id)
);
CREATE INDEX model_calls_by_assignment ON model_calls (assignment_id, at);

-- A test run the platform executed for the candidate. `accepted` is 1 when
-- the run counts (red: the tests failed; green: they passed).
CREATE TABLE witness_runs (
    id            INTEGER PRIMARY KEY,
    assignment_id TEXT NOT NULL REFERENCES assignments (id),
    kind          TEXT NOT NULL CHECK (kind IN ('red', 'green')),
    at            INTEGER NOT NULL,
    accepted      INTEGER NOT NULL,
    exit_code     INTEGER,
    log           TEXT NOT NULL,
    tree_sha256   TEXT NOT NULL,
    env_json      TEXT NOT NULL,
    refusal       TEXT
);
CREATE INDEX witness_runs_by_assignment ON witness_runs (assignment_id, at);

-- Which witnessed runs preceded a submission (ids, as JSON).
ALTER TABLE submissions ADD COLUMN witnessed_json TEXT;
