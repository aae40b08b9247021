-- Blobs in the database (#12): when the database is Postgres, every blob
-- (submission zips, transcripts, packet version archives) is stored here
-- in chunks of about 1 MiB, so a worker on another machine needs nothing
-- but the database URL. A blob is complete once its `blobs` row exists;
-- chunks are written first (each insert on its own), so a reader never
-- sees a partial blob.
CREATE TABLE blobs (
    sha256 TEXT PRIMARY KEY,
    size BIGINT NOT NULL,
    chunks BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE blob_chunks (
    sha256 TEXT NOT NULL,
    seq BIGINT NOT NULL,
    bytes BYTEA NOT NULL,
    PRIMARY KEY (sha256, seq)
);

-- A packet version's folder as a zip blob, by the version's tree digest:
-- workers materialise versions from it instead of a local packets/ folder.
CREATE TABLE packet_archives (
    digest TEXT PRIMARY KEY,
    blob_sha256 TEXT NOT NULL
);

-- LISTEN/NOTIFY (#12): every job that becomes claimable (enqueued, or put
-- back after a failed attempt) is announced on `gatehouse_jobs`, delivered
-- when its transaction commits, so idle workers in any process wake at once
-- instead of polling.
CREATE FUNCTION gatehouse_notify_job() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('gatehouse_jobs', NEW.kind);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER jobs_notify AFTER INSERT OR UPDATE OF state ON jobs
    FOR EACH ROW WHEN (NEW.state = 'queued') EXECUTE FUNCTION gatehouse_notify_job();
