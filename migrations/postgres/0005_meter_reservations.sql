-- The model meter for real providers (issue #11): budgets that cannot be
-- raced, and per-call costs that do not grow with the ledger.
--
-- `reserved_tokens` is what admission reserved for a call still in flight
-- (status 0): the prompt estimate plus the max_tokens sent upstream.
-- Settlement replaces it with the upstream's usage and sets it to 0.
-- `counted` is 1 when the call counts against the budgets: forwarded and
-- not lost before the upstream saw it (refused calls and connection
-- failures are 0; upstream 5xx answers and time-outs are 1).
-- `client_retry` is the retry number a client library said this request is
-- (`x-stainless-retry-count` and the like), 0 for a first attempt.
ALTER TABLE model_calls ADD COLUMN reserved_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE model_calls ADD COLUMN counted BIGINT NOT NULL DEFAULT 1;
ALTER TABLE model_calls ADD COLUMN client_retry BIGINT NOT NULL DEFAULT 0;
UPDATE model_calls SET counted = 0 WHERE refused IS NOT NULL OR status >= 500;

-- The duplicate lookup of every call, and the count of refusals written.
CREATE INDEX model_calls_by_request ON model_calls (assignment_id, request_sha256);
CREATE INDEX model_calls_refused ON model_calls (assignment_id) WHERE refused IS NOT NULL;

-- Running totals of the counted calls of an assignment, kept in the same
-- transaction as the rows, so admission reads one row instead of summing
-- the ledger. `tokens` includes the reservations of calls in flight.
CREATE TABLE meter_totals (
    assignment_id TEXT PRIMARY KEY REFERENCES assignments (id),
    calls         BIGINT NOT NULL DEFAULT 0,
    tokens        BIGINT NOT NULL DEFAULT 0,
    request_bytes BIGINT NOT NULL DEFAULT 0
);
INSERT INTO meter_totals (assignment_id, calls, tokens, request_bytes)
    SELECT assignment_id, COUNT(*), COALESCE(SUM(prompt_tokens + completion_tokens + reserved_tokens), 0), COALESCE(SUM(request_bytes), 0)
    FROM model_calls WHERE counted = 1 GROUP BY assignment_id;
