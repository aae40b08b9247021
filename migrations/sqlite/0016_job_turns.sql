-- A grading job's turn, fixed when it is queued: how many grading jobs its
-- assignment had before it (0 for a self-test or an audit). Workers claim
-- by priority, then turn, then age (round robin across assignments). The
-- claim computed the turn for every pending job on every claim, counting
-- through `submissions`; with 3,000 gradings queued on Postgres a claim
-- took long enough that the soak's larger setting did not finish. Stored,
-- the claim walks `jobs_pending_order` and stops at the first free job.
ALTER TABLE jobs ADD COLUMN turn INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET turn = (
    SELECT COUNT(*) FROM jobs o
    JOIN submissions os ON os.id = o.subject
    JOIN submissions s ON s.id = jobs.subject
    WHERE o.kind = 'grade' AND os.assignment_id = s.assignment_id AND o.id < jobs.id
) WHERE kind = 'grade' AND state IN ('queued', 'running');
CREATE INDEX jobs_pending_order ON jobs (priority DESC, turn, id) WHERE state IN ('queued', 'running');
