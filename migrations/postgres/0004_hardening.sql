-- Results are the hiring team's to release (issue #10): what a candidate
-- sees of a graded submission (never | after-review | immediately), and how
-- many submissions one assignment accepts.
ALTER TABLE assignments ADD COLUMN results TEXT NOT NULL DEFAULT 'never';
ALTER TABLE assignments ADD COLUMN max_submissions BIGINT NOT NULL DEFAULT 3;
-- The digest of the folder the self-test ran on; a version publishes only
-- while its digest still matches it.
ALTER TABLE packet_versions ADD COLUMN checked_digest TEXT;
