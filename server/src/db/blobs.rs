//! Blobs kept in the database, in chunks (Postgres only; with SQLite the
//! blob store is the local folder and [`BlobRows::blobs_in_db`] is false).
//! `crate::blobs` is the one caller: it streams a blob in chunk by chunk and
//! out chunk by chunk, never whole.

use async_trait::async_trait;

use super::DbResult;

#[async_trait]
pub trait BlobRows {
    /// Whether this backend holds the blobs (then the local folder is only
    /// a cache of them).
    fn blobs_in_db(&self) -> bool;
    /// The size and chunk count of a complete blob, if stored.
    async fn blob_meta(&self, sha256: &str) -> DbResult<Option<(i64, i64)>>;
    /// Stores chunk `seq` (from 0) of a blob being written; a chunk already
    /// stored (the same content written twice) is kept.
    async fn put_blob_chunk(&self, sha256: &str, seq: i64, bytes: &[u8]) -> DbResult<()>;
    /// Marks the blob complete once all its chunks are stored.
    async fn finish_blob(&self, sha256: &str, size: i64, chunks: i64, now: i64) -> DbResult<()>;
    /// Chunk `seq` of a stored blob.
    async fn blob_chunk(&self, sha256: &str, seq: i64) -> DbResult<Option<Vec<u8>>>;
    /// Records the archive blob of the packet folder with this tree digest.
    async fn set_packet_archive(&self, digest: &str, blob_sha256: &str) -> DbResult<()>;
    /// The archive blob of the packet folder with this tree digest.
    async fn packet_archive(&self, digest: &str) -> DbResult<Option<String>>;
}
