-- Gatehouse's schema, SQLite flavour. Times are Unix milliseconds (UTC).
-- migrations/postgres holds the same schema for a Postgres backend.

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'author', 'reviewer')),
    password_hash TEXT NOT NULL,
    disabled      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL
);

-- Tokens for the integration API; only a SHA-256 of the token is kept.
CREATE TABLE api_tokens (
    id          INTEGER PRIMARY KEY,
    user_id     INTEGER NOT NULL REFERENCES users (id),
    name        TEXT NOT NULL,
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

CREATE TABLE packets (
    id          INTEGER PRIMARY KEY,
    slug        TEXT NOT NULL UNIQUE,
    title       TEXT NOT NULL,
    builtin     INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
);

-- One row per draft or published version. A published row never changes;
-- an edit of a published packet makes a new draft. `dir` is the packet
-- folder under the blob directory.
CREATE TABLE packet_versions (
    id           INTEGER PRIMARY KEY,
    packet_id    INTEGER NOT NULL REFERENCES packets (id),
    version      INTEGER,
    state        TEXT NOT NULL CHECK (state IN ('draft', 'published')),
    dir          TEXT NOT NULL,
    digest       TEXT NOT NULL,
    check_state  TEXT NOT NULL DEFAULT 'none' CHECK (check_state IN ('none', 'running', 'passed', 'failed')),
    check_report TEXT,
    created_by   INTEGER REFERENCES users (id),
    created_at   INTEGER NOT NULL,
    published_at INTEGER,
    UNIQUE (packet_id, version)
);

CREATE TABLE assignments (
    id                TEXT PRIMARY KEY,
    packet_version_id INTEGER NOT NULL REFERENCES packet_versions (id),
    candidate_name    TEXT NOT NULL,
    email             TEXT NOT NULL,
    deadline          INTEGER NOT NULL,
    time_box_secs     INTEGER,
    seed              TEXT NOT NULL,
    token_hash        TEXT NOT NULL UNIQUE,
    state             TEXT NOT NULL DEFAULT 'invited'
                      CHECK (state IN ('invited', 'started', 'submitted', 'grading', 'graded', 'failed')),
    started_at        INTEGER,
    created_by        INTEGER REFERENCES users (id),
    created_at        INTEGER NOT NULL
);

-- A submission is recorded only once its zip is fully on disk (blob_sha256).
CREATE TABLE submissions (
    id             TEXT PRIMARY KEY,
    assignment_id  TEXT NOT NULL REFERENCES assignments (id),
    blob_sha256    TEXT NOT NULL,
    size_bytes     INTEGER NOT NULL,
    received_at    INTEGER NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('queued', 'grading', 'graded', 'failed', 'refused')),
    refusal        TEXT,
    error          TEXT,
    scorecard_json TEXT,
    receipt_json   TEXT,
    decision       TEXT,
    score          REAL,
    graded_at      INTEGER
);
CREATE INDEX submissions_by_assignment ON submissions (assignment_id);

-- The grading queue. A worker claims a job by setting lease_owner and
-- lease_until in one UPDATE; an expired lease makes the job claimable again.
-- `kind` is 'grade' (a submission) or 'check' (a packet version self-test).
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('grade', 'check')),
    subject      TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 3,
    lease_owner  TEXT,
    lease_until  INTEGER,
    last_error   TEXT,
    created_at   INTEGER NOT NULL,
    finished_at  INTEGER
);
CREATE INDEX jobs_claimable ON jobs (state, lease_until);

-- Reviewer scores for human criteria: append-only, the latest row per
-- (submission, criterion) applies; the rows are the audit trail.
CREATE TABLE human_scores (
    id            INTEGER PRIMARY KEY,
    submission_id TEXT NOT NULL REFERENCES submissions (id),
    criterion     TEXT NOT NULL,
    level         INTEGER NOT NULL,
    reason        TEXT NOT NULL,
    reviewer_id   INTEGER NOT NULL REFERENCES users (id),
    created_at    INTEGER NOT NULL
);

CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY,
    at         INTEGER NOT NULL,
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
    expires_at INTEGER NOT NULL
);
