-- Single sign-on and the ATS (issue #31, parts 1 and 2).
--
-- An OpenID Connect sign-in under way: the hash of its `state`, the
-- browser it was started in (the hash of a cookie set then), its `nonce`
-- and PKCE verifier, and where to go after. The callback deletes the row
-- as it reads it, so a `state` is good once; rows older than ten minutes
-- are refused and swept.
CREATE TABLE oidc_logins (
    state_hash    TEXT PRIMARY KEY,
    provider      TEXT NOT NULL,
    browser_hash  TEXT NOT NULL,
    nonce         TEXT NOT NULL,
    pkce_verifier TEXT NOT NULL,
    next          TEXT NOT NULL,
    created_at    BIGINT NOT NULL
);
CREATE INDEX oidc_logins_created ON oidc_logins (created_at);

-- An ATS connection (Greenhouse's Assessment Partner API): its own HTTP
-- Basic credential (only a SHA-256 of the key is kept) and the settings
-- of the assignments it creates.
CREATE TABLE ats_connections (
    id             BIGSERIAL PRIMARY KEY,
    name           TEXT NOT NULL,
    key_hash       TEXT NOT NULL UNIQUE,
    results        TEXT NOT NULL DEFAULT 'never' CHECK (results IN ('never', 'after-review', 'immediately')),
    blind_review   BOOLEAN NOT NULL DEFAULT FALSE,
    deadline_days  BIGINT NOT NULL DEFAULT 7,
    callback_hosts TEXT NOT NULL DEFAULT '',
    created_by     BIGINT REFERENCES users(id),
    created_at     BIGINT NOT NULL,
    revoked_at     BIGINT
);

-- A test the ATS sent (`send_test`): its id is the partner_interview_id.
-- The callback URL, when given, is called once the result is complete.
CREATE TABLE ats_interviews (
    id               TEXT PRIMARY KEY,
    connection_id    BIGINT NOT NULL REFERENCES ats_connections(id),
    assignment_id    TEXT NOT NULL REFERENCES assignments(id),
    partner_test_id  TEXT NOT NULL,
    profile_url      TEXT,
    callback_url     TEXT,
    callback_done_at BIGINT,
    callback_error   TEXT,
    created_at       BIGINT NOT NULL
);
CREATE INDEX ats_interviews_pending ON ats_interviews (callback_done_at, created_at);
