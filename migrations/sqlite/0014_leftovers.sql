-- Leftovers (#29): the same columns as on Postgres (SQLite keeps its blobs
-- in the data folder and never writes these tables). A chunk carries when
-- it was written, a packet archive when it was last stored or asked for,
-- so a sweep can tell dead uploads and unused archives from live ones.
ALTER TABLE blob_chunks ADD COLUMN written_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE packet_archives ADD COLUMN used_at INTEGER NOT NULL DEFAULT 0;
