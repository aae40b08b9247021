-- The mutation audit as a job of the platform (issue #13): an author's
-- "Audit the hidden tests" on a packet version, its result kept with the
-- version, and the author ledger of the model calls it made.

-- `jobs.kind` gains 'audit' (subject: a packet_audits id). SQLite cannot
-- alter a CHECK, so the table is rebuilt with the same rows and ids.
CREATE TABLE jobs_new (
    id           INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('grade', 'check', 'audit')),
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
INSERT INTO jobs_new (id, kind, subject, state, attempts, max_attempts, lease_owner, lease_until, last_error, created_at, finished_at)
    SELECT id, kind, subject, state, attempts, max_attempts, lease_owner, lease_until, last_error, created_at, finished_at FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_claimable ON jobs (state, lease_until);

-- One audit of one packet version. `mode` is 'rules' or 'model';
-- `functions` the definitions audited (space-separated, empty: all);
-- `mutants` the per-definition cap; `max_calls`/`max_tokens` the model
-- caps (0 in rules mode). `digest` is the version's digest when queued;
-- `report_json` the grader's AuditReport once done; the counts are copied
-- out of it for lists. `error` says why a failed audit could not run.
CREATE TABLE packet_audits (
    id            INTEGER PRIMARY KEY,
    version_id    INTEGER NOT NULL REFERENCES packet_versions (id),
    requested_by  INTEGER REFERENCES users (id),
    mode          TEXT NOT NULL CHECK (mode IN ('rules', 'model')),
    functions     TEXT NOT NULL DEFAULT '',
    mutants       INTEGER NOT NULL,
    model         TEXT NOT NULL DEFAULT '',
    max_calls     INTEGER NOT NULL DEFAULT 0,
    max_tokens    INTEGER NOT NULL DEFAULT 0,
    state         TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    digest        TEXT NOT NULL,
    report_json   TEXT,
    killed        INTEGER,
    survived      INTEGER,
    crashed       INTEGER,
    invalid       INTEGER,
    error         TEXT,
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER
);
CREATE INDEX packet_audits_by_version ON packet_audits (version_id, id);

-- The author ledger: every model call an audit made, refused by its cap or
-- not. `outcome` is answered, malformed, refused, unreachable or
-- upstream-error; `status` the upstream's HTTP status (NULL when none).
CREATE TABLE packet_audit_calls (
    id                INTEGER PRIMARY KEY,
    audit_id          INTEGER NOT NULL REFERENCES packet_audits (id),
    version_id        INTEGER NOT NULL REFERENCES packet_versions (id),
    author_id         INTEGER REFERENCES users (id),
    n                 INTEGER NOT NULL,
    function          TEXT NOT NULL,
    model             TEXT NOT NULL,
    outcome           TEXT NOT NULL,
    status            INTEGER,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    tokens_estimated  INTEGER NOT NULL DEFAULT 0,
    request_bytes     INTEGER NOT NULL DEFAULT 0,
    response_bytes    INTEGER NOT NULL DEFAULT 0,
    started_at        INTEGER NOT NULL,
    ended_at          INTEGER NOT NULL,
    error             TEXT
);
CREATE INDEX packet_audit_calls_by_audit ON packet_audit_calls (audit_id, n);
