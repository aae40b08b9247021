-- The model meter's speed (issue #11): `meter_totals` is kept by triggers
-- on `model_calls`, so recording a call and settling it are one statement
-- each (atomic with its totals, as the transactions of two and three
-- statements were before), and the invariant "meter_totals = the sum of
-- the counted rows" holds for any write of the ledger.
--
-- A new row adds its call, reservation and request bytes when it counts
-- (refused rows: only their transcript bytes).
CREATE TRIGGER model_calls_admit AFTER INSERT ON model_calls
BEGIN
    INSERT INTO meter_totals (assignment_id, calls, tokens, request_bytes, transcript_bytes)
    VALUES (NEW.assignment_id, NEW.counted, NEW.reserved_tokens * NEW.counted, NEW.request_bytes * NEW.counted, NEW.transcript_bytes)
    ON CONFLICT (assignment_id) DO UPDATE SET calls = calls + excluded.calls, tokens = tokens + excluded.tokens,
        request_bytes = request_bytes + excluded.request_bytes, transcript_bytes = transcript_bytes + excluded.transcript_bytes;
END;

-- Settling a call in flight (status 0 to its outcome) replaces its
-- reservation with its tokens and its reserved transcript room with the
-- bytes kept, and takes the call and its bytes out when it no longer counts.
CREATE TRIGGER model_calls_settle AFTER UPDATE OF status ON model_calls
WHEN OLD.status = 0 AND NEW.status <> 0
BEGIN
    UPDATE meter_totals SET
        calls = calls - OLD.counted + NEW.counted,
        tokens = tokens - OLD.reserved_tokens * OLD.counted + (NEW.prompt_tokens + NEW.completion_tokens) * NEW.counted,
        request_bytes = request_bytes - (OLD.counted - NEW.counted) * OLD.request_bytes,
        transcript_bytes = transcript_bytes - OLD.transcript_bytes + NEW.transcript_bytes
    WHERE assignment_id = OLD.assignment_id;
END;
