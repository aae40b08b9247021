-- The mutation audit as a job of the platform (issue #13): an author's
-- "Audit the hidden tests" on a packet version, its result kept with the
-- version, and the author ledger of the model calls it made.

-- `jobs.kind` gains 'audit' (subject: a packet_audits id).
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('grade', 'check', 'audit'));

-- One audit of one packet version. `mode` is 'rules' or 'model';
-- `functions` the definitions audited (space-separated, empty: all);
-- `mutants` the per-definition cap; `max_calls`/`max_tokens` the model
-- caps (0 in rules mode). `digest` is the version's digest when queued;
-- `report_json` the grader's AuditReport once done; the counts are copied
-- out of it for lists. `error` says why a failed audit could not run.
CREATE TABLE packet_audits (
    id            BIGSERIAL PRIMARY KEY,
    version_id    BIGINT NOT NULL REFERENCES packet_versions (id),
    requested_by  BIGINT REFERENCES users (id),
    mode          TEXT NOT NULL CHECK (mode IN ('rules', 'model')),
    functions     TEXT NOT NULL DEFAULT '',
    mutants       BIGINT NOT NULL,
    model         TEXT NOT NULL DEFAULT '',
    max_calls     BIGINT NOT NULL DEFAULT 0,
    max_tokens    BIGINT NOT NULL DEFAULT 0,
    state         TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    digest        TEXT NOT NULL,
    report_json   TEXT,
    killed        BIGINT,
    survived      BIGINT,
    crashed       BIGINT,
    invalid       BIGINT,
    error         TEXT,
    created_at    BIGINT NOT NULL,
    started_at    BIGINT,
    finished_at   BIGINT
);
CREATE INDEX packet_audits_by_version ON packet_audits (version_id, id);

-- The author ledger: every model call an audit made, refused by its cap or
-- not. `outcome` is answered, malformed, refused, unreachable or
-- upstream-error; `status` the upstream's HTTP status (NULL when none).
CREATE TABLE packet_audit_calls (
    id                BIGSERIAL PRIMARY KEY,
    audit_id          BIGINT NOT NULL REFERENCES packet_audits (id),
    version_id        BIGINT NOT NULL REFERENCES packet_versions (id),
    author_id         BIGINT REFERENCES users (id),
    n                 BIGINT NOT NULL,
    function          TEXT NOT NULL,
    model             TEXT NOT NULL,
    outcome           TEXT NOT NULL,
    status            BIGINT,
    prompt_tokens     BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    tokens_estimated  BIGINT NOT NULL DEFAULT 0,
    request_bytes     BIGINT NOT NULL DEFAULT 0,
    response_bytes    BIGINT NOT NULL DEFAULT 0,
    started_at        BIGINT NOT NULL,
    ended_at          BIGINT NOT NULL,
    error             TEXT
);
CREATE INDEX packet_audit_calls_by_audit ON packet_audit_calls (audit_id, n);
