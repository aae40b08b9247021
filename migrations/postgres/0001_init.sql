-- Gatehouse's schema, Postgres flavour. Times are Unix milliseconds (UTC).
-- The same schema as migrations/sqlite, for the Postgres backend. Where the
-- dialects differ: BIGSERIAL for INTEGER PRIMARY KEY, BIGINT for INTEGER,
-- BOOLEAN for the 0/1 columns the code reads as booleans (users.disabled,
-- packets.builtin, assignments.blind_review), and submissions.seq standing in
-- for SQLite's implicit rowid (insertion order).

CREATE TABLE users (
    id            BIGSERIAL PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'author', 'reviewer')),
    password_hash TEXT NOT NULL,
    disabled      BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    BIGINT NOT NULL
);

-- Tokens for the integration API; only a SHA-256 of the token is kept.
CREATE TABLE api_tokens (
    id          BIGSERIAL PRIMARY KEY,
    user_id     BIGINT NOT NULL REFERENCES users (id),
    name        TEXT NOT NULL,
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);

CREATE TABLE packets (
    id          BIGSERIAL PRIMARY KEY,
    slug        TEXT NOT NULL UNIQUE,
    title       TEXT NOT NULL,
    builtin     BOOLEAN NOT NULL DEFAULT FALSE,
    created_at  BIGINT NOT NULL
);

-- One row per draft or published version. A published row never changes;
-- an edit of a published packet makes a new draft. `dir` is the packet
-- folder under the blob directory.
CREATE TABLE packet_versions (
    id           BIGSERIAL PRIMARY KEY,
    packet_id    BIGINT NOT NULL REFERENCES packets (id),
    version      BIGINT,
    state        TEXT NOT NULL CHECK (state IN ('draft', 'published')),
    dir          TEXT NOT NULL,
    digest       TEXT NOT NULL,
    check_state  TEXT NOT NULL DEFAULT 'none' CHECK (check_state IN ('none', 'running', 'passed', 'failed')),
    check_report TEXT,
    created_by   BIGINT REFERENCES users (id),
    created_at   BIGINT NOT NULL,
    published_at BIGINT,
    UNIQUE (packet_id, version)
);

CREATE TABLE assignments (
    id                TEXT PRIMARY KEY,
    packet_version_id BIGINT NOT NULL REFERENCES packet_versions (id),
    candidate_name    TEXT NOT NULL,
    email             TEXT NOT NULL,
    deadline          BIGINT NOT NULL,
    time_box_secs     BIGINT,
    seed              TEXT NOT NULL,
    token_hash        TEXT NOT NULL UNIQUE,
    state             TEXT NOT NULL DEFAULT 'invited'
                      CHECK (state IN ('invited', 'started', 'submitted', 'grading', 'graded', 'failed')),
    started_at        BIGINT,
    created_by        BIGINT REFERENCES users (id),
    created_at        BIGINT NOT NULL
);

-- A submission is recorded only once its zip is fully on disk (blob_sha256).
CREATE TABLE submissions (
    id             TEXT PRIMARY KEY,
    seq            BIGSERIAL NOT NULL UNIQUE,
    assignment_id  TEXT NOT NULL REFERENCES assignments (id),
    blob_sha256    TEXT NOT NULL,
    size_bytes     BIGINT NOT NULL,
    received_at    BIGINT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('queued', 'grading', 'graded', 'failed', 'refused')),
    refusal        TEXT,
    error          TEXT,
    scorecard_json TEXT,
    receipt_json   TEXT,
    decision       TEXT,
    score          DOUBLE PRECISION,
    graded_at      BIGINT
);
CREATE INDEX submissions_by_assignment ON submissions (assignment_id);

-- The grading queue. A worker claims a job by setting lease_owner and
-- lease_until in one UPDATE; an expired lease makes the job claimable again.
-- `kind` is 'grade' (a submission) or 'check' (a packet version self-test).
CREATE TABLE jobs (
    id           BIGSERIAL PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('grade', 'check')),
    subject      TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts     BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL DEFAULT 3,
    lease_owner  TEXT,
    lease_until  BIGINT,
    last_error   TEXT,
    created_at   BIGINT NOT NULL,
    finished_at  BIGINT
);
CREATE INDEX jobs_claimable ON jobs (state, lease_until);

-- Reviewer scores for human criteria: append-only, the latest row per
-- (submission, criterion) applies; the rows are the audit trail.
CREATE TABLE human_scores (
    id            BIGSERIAL PRIMARY KEY,
    submission_id TEXT NOT NULL REFERENCES submissions (id),
    criterion     TEXT NOT NULL,
    level         BIGINT NOT NULL,
    reason        TEXT NOT NULL,
    reviewer_id   BIGINT NOT NULL REFERENCES users (id),
    created_at    BIGINT NOT NULL
);

CREATE TABLE audit_log (
    id         BIGSERIAL PRIMARY KEY,
    at         BIGINT NOT NULL,
    actor      TEXT NOT NULL,
    action     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT ''
);

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Browser sessions (tower-sessions records as JSON).
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    data       TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
