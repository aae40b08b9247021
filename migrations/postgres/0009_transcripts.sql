-- Transcripts of the model meter (issue #11): each call's request body and
-- the response body the client received (a stream reassembled from its SSE
-- chunks into one chat completion; a refusal's error body with its reason)
-- are kept in the content-addressed blob store (blobs/<aa>/<sha256>).
--
-- `request_body_sha256` / `response_body_sha256` are the SHA-256 of the
-- kept bytes (NULL when nothing was kept: a transcript cap of 0, or the
-- assignment's transcript budget used up). `transcript_cut` says what was
-- cut and why (NULL when both bodies are whole). `transcript_bytes` is
-- what the row charges to the assignment's transcript budget: while the
-- call is in flight the request kept plus the room reserved for its
-- response; once settled, the bytes kept.
ALTER TABLE model_calls ADD COLUMN request_body_sha256 TEXT;
ALTER TABLE model_calls ADD COLUMN response_body_sha256 TEXT;
ALTER TABLE model_calls ADD COLUMN transcript_cut TEXT;
ALTER TABLE model_calls ADD COLUMN transcript_bytes BIGINT NOT NULL DEFAULT 0;

-- The running total of transcript bytes kept per assignment (refused calls
-- included), so admission reads one row.
ALTER TABLE meter_totals ADD COLUMN transcript_bytes BIGINT NOT NULL DEFAULT 0;
