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
    /// Marks the archive of this tree digest used at `now` (stored again or
    /// materialised), so [`BlobRows::sweep_packet_archives`] keeps it.
    async fn touch_packet_archive(&self, digest: &str, now: i64) -> DbResult<()>;
    /// Deletes a blob: its `blobs` row (so it is no longer complete), then
    /// its chunks, in one transaction.
    async fn delete_blob(&self, sha256: &str) -> DbResult<()>;
    /// Removes the archives of tree digests no packet version has that
    /// nobody used since `before`, and each one's blob when nothing else
    /// refers to it (another archive, a submission, a transcript); returns
    /// (archives, blobs) removed.
    async fn sweep_packet_archives(&self, before: i64) -> DbResult<(u64, u64)>;
    /// Removes the chunks of blobs never finished (no `blobs` row) whose
    /// last chunk was written before `before`: an upload whose process
    /// died. Returns how many chunks.
    async fn sweep_orphan_chunks(&self, before: i64) -> DbResult<u64>;
}
