-- The jobs of a subject, looked up by every claim's fair ranking (a
-- grading job ranks by the earlier grading jobs of its assignment, found
-- through their submissions) and by `jobs_for`. Without it each lookup
-- scanned the whole table: with 3,000 submissions queued a claim held
-- SQLite's write lock for seconds and uploads failed "database is locked".
CREATE INDEX jobs_by_subject ON jobs (subject);
