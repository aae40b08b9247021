-- Candidate data: erasure and retention (issue #31, part 5).
--
-- An erased assignment keeps its row as a tombstone (packet version,
-- deadline, state, no name, no email, a link that no longer opens it) so
-- lists, exports and the ATS can say "erased"; everything else of the
-- candidate's is deleted. `erasures` is the record of each erasure: who,
-- when, why, how much went, and the final score and decision (no personal
-- data), so a packet's aggregate results survive.
ALTER TABLE assignments ADD COLUMN erased_at BIGINT;

-- Days after an assignment's deadline its candidate's data is erased;
-- NULL: the global setting (`settings.retention_days`) applies.
ALTER TABLE packets ADD COLUMN retention_days BIGINT;

CREATE TABLE erasures (
    id                BIGSERIAL PRIMARY KEY,
    assignment_id     TEXT NOT NULL UNIQUE REFERENCES assignments (id),
    packet_version_id BIGINT NOT NULL REFERENCES packet_versions (id),
    -- `user:<id>` or `system:retention`.
    actor             TEXT NOT NULL,
    reason            TEXT NOT NULL CHECK (reason IN ('request', 'retention')),
    at                BIGINT NOT NULL,
    -- The hash of the link the candidate had, so the link answers
    -- "erased" instead of "unknown".
    link_hash         TEXT NOT NULL,
    submissions       BIGINT NOT NULL,
    witness_runs      BIGINT NOT NULL,
    model_calls       BIGINT NOT NULL,
    rows_removed      BIGINT NOT NULL,
    blobs_removed     BIGINT NOT NULL,
    bytes_removed     BIGINT NOT NULL,
    final_score       DOUBLE PRECISION,
    final_decision    TEXT
);
CREATE INDEX erasures_by_link ON erasures (link_hash);
CREATE INDEX assignments_by_deadline ON assignments (deadline) WHERE erased_at IS NULL;
