-- A priority on jobs (issue #14): workers claim the highest first, then
-- (for gradings) round robin across assignments, then the oldest. Gradings
-- and an author's self-tests and audits are 0; the server's background
-- self-tests of the built-in library are below, so a candidate's grading
-- is always claimed before a built-in check that waits.
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
