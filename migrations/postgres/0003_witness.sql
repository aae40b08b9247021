-- The pinned workspace (issue #4): model keys, the model meter's ledger, and
-- the red and green runs the platform witnessed. Times are Unix ms.

-- A key for the metered model endpoint. The key itself is derived from the
-- assignment's link token and the generation (see server/src/meter), so only
-- its hash is stored; revoking sets revoked_at, reissuing adds a generation.
CREATE TABLE model_keys (
    id            BIGSERIAL PRIMARY KEY,
    assignment_id TEXT NOT NULL REFERENCES assignments (id),
    generation    BIGINT NOT NULL,
    key_hash      TEXT NOT NULL UNIQUE,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT,
    UNIQUE (assignment_id, generation)
);

-- One row per call to the metered endpoint, forwarded or refused.
-- `refused` names the cap or rule that refused it (then nothing was
-- forwarded); `tokens_estimated` is 1 when the upstream sent no usage.
CREATE TABLE model_calls (
    id                BIGSERIAL PRIMARY KEY,
    assignment_id     TEXT NOT NULL REFERENCES assignments (id),
    at                BIGINT NOT NULL,
    model             TEXT NOT NULL DEFAULT '',
    stream            BIGINT NOT NULL DEFAULT 0,
    request_bytes     BIGINT NOT NULL,
    response_bytes    BIGINT NOT NULL DEFAULT 0,
    prompt_tokens     BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    tokens_estimated  BIGINT NOT NULL DEFAULT 0,
    latency_ms        BIGINT NOT NULL DEFAULT 0,
    status            BIGINT NOT NULL,
    error             TEXT,
    refused           TEXT,
    request_sha256    TEXT NOT NULL,
    duplicate_of      BIGINT REFERENCES model_calls (id)
);
CREATE INDEX model_calls_by_assignment ON model_calls (assignment_id, at);

-- A test run the platform executed for the candidate. `accepted` is 1 when
-- the run counts (red: the tests failed; green: they passed).
CREATE TABLE witness_runs (
    id            BIGSERIAL PRIMARY KEY,
    assignment_id TEXT NOT NULL REFERENCES assignments (id),
    kind          TEXT NOT NULL CHECK (kind IN ('red', 'green')),
    at            BIGINT NOT NULL,
    accepted      BIGINT NOT NULL,
    exit_code     BIGINT,
    log           TEXT NOT NULL,
    tree_sha256   TEXT NOT NULL,
    env_json      TEXT NOT NULL,
    refusal       TEXT
);
CREATE INDEX witness_runs_by_assignment ON witness_runs (assignment_id, at);

-- Which witnessed runs preceded a submission (ids, as JSON).
ALTER TABLE submissions ADD COLUMN witnessed_json TEXT;
