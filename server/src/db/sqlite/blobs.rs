//! With SQLite the blobs live in `<data_dir>/blobs/`: nothing is stored
//! here, and a write is refused (it would be a caller's bug).

use async_trait::async_trait;

use super::SqliteStore;
use crate::db::DbResult;
use crate::db::blobs::BlobRows;

fn not_here() -> sqlx::Error {
    sqlx::Error::Protocol(
        "the SQLite backend keeps blobs in the data folder, not in the database".into(),
    )
}

#[async_trait]
impl BlobRows for SqliteStore {
    fn blobs_in_db(&self) -> bool {
        false
    }

    async fn blob_meta(&self, _sha256: &str) -> DbResult<Option<(i64, i64)>> {
        Ok(None)
    }

    async fn put_blob_chunk(&self, _sha256: &str, _seq: i64, _bytes: &[u8]) -> DbResult<()> {
        Err(not_here())
    }

    async fn finish_blob(
        &self,
        _sha256: &str,
        _size: i64,
        _chunks: i64,
        _now: i64,
    ) -> DbResult<()> {
        Err(not_here())
    }

    async fn blob_chunk(&self, _sha256: &str, _seq: i64) -> DbResult<Option<Vec<u8>>> {
        Ok(None)
    }

    async fn set_packet_archive(&self, _digest: &str, _blob_sha256: &str) -> DbResult<()> {
        Err(not_here())
    }

    async fn packet_archive(&self, _digest: &str) -> DbResult<Option<String>> {
        Ok(None)
    }

    async fn touch_packet_archive(&self, _digest: &str, _now: i64) -> DbResult<()> {
        Ok(())
    }

    async fn delete_blob(&self, _sha256: &str) -> DbResult<()> {
        Ok(())
    }

    async fn sweep_packet_archives(&self, _before: i64) -> DbResult<(u64, u64)> {
        Ok((0, 0))
    }

    async fn sweep_orphan_chunks(&self, _before: i64) -> DbResult<u64> {
        Ok(0)
    }
}
