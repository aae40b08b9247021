-- Leftovers (#29). A chunk carries when it was written, so a sweep can tell
-- the chunks of an upload whose process died (no `blobs` row, nothing
-- written for a while) from those of an upload still streaming in. A
-- packet archive carries when it was last stored or asked for, so a sweep
-- removes archives of tree digests no version has (a draft's earlier
-- edits) only once nobody has used them for a while (an edit stores the
-- archive before the version row names its digest). Rows from before get
-- 0: old.
ALTER TABLE blob_chunks ADD COLUMN written_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE packet_archives ADD COLUMN used_at BIGINT NOT NULL DEFAULT 0;
