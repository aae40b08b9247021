-- Blind review (issue #14): reviewers see a pseudonym instead of the
-- candidate's name and email until they have saved their own scores, and
-- blind submissions are listed in a stable pseudo-random order.
ALTER TABLE assignments ADD COLUMN blind_review INTEGER NOT NULL DEFAULT 0;
