-- Blobs in the database (#12) are a Postgres feature: with SQLite every
-- blob stays in `<data_dir>/blobs/` and these tables stay empty. They exist
-- so both backends keep one schema.
CREATE TABLE blobs (
    sha256 TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE blob_chunks (
    sha256 TEXT NOT NULL,
    seq INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (sha256, seq)
);

CREATE TABLE packet_archives (
    digest TEXT PRIMARY KEY,
    blob_sha256 TEXT NOT NULL
);
