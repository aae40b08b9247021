//! The content-addressed blob store: `<data_dir>/blobs/<aa>/<sha256>`, and,
//! when the database is Postgres, the database's `blob_chunks` too.
//!
//! [`Blobs`] is the store's handle. With SQLite the local folder is the
//! store. With Postgres the database is: every committed blob is also
//! streamed into it in chunks of [`CHUNK_BYTES`] (one chunk in memory at a
//! time), and the local folder is a cache that [`Blobs::local_copy`] fills
//! from the database on demand, chunk by chunk, checking the digest, so a
//! worker on another machine with an empty data folder reads every blob.
//!
//! Writes stream into a temporary file under `<data_dir>/tmp/` while the
//! bytes are hashed and counted. A write over the size cap stops at once and
//! removes the temporary file. A finished write is synced and renamed into
//! place, so a blob path either holds the complete content or does not exist;
//! nothing partial is ever visible under `blobs/`.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::db::Db;

/// How much a writer buffers before handing bytes to the file.
const BUFFER_BYTES: usize = 1 << 20;

/// The size of one `blob_chunks` row (the last chunk of a blob is shorter).
pub const CHUNK_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("the upload is larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("blob store I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("blob store database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("the blob {sha256} in the database is damaged: {why}")]
    Damaged { sha256: String, why: String },
}

/// The blob store of one app: its data folder and, when the database keeps
/// the blobs (Postgres), the database.
#[derive(Clone)]
pub struct Blobs {
    data_dir: PathBuf,
    db: Db,
}

impl Blobs {
    pub fn new(data_dir: &Path, db: Db) -> Blobs {
        Blobs { data_dir: data_dir.to_path_buf(), db }
    }

    /// Whether the database holds the blobs (the local folder is a cache).
    pub fn in_db(&self) -> bool {
        self.db.blobs_in_db()
    }

    /// Starts a streaming write of at most `cap` bytes.
    pub async fn writer(&self, cap: u64) -> Result<BlobWriter, BlobError> {
        BlobWriter::create(self, cap).await
    }

    /// Stores `bytes` (whose SHA-256 is `sha256`) locally and, when the
    /// database keeps blobs, in the database.
    pub async fn put_bytes(
        &self,
        sha256: &str,
        bytes: axum::body::Bytes,
    ) -> Result<PathBuf, BlobError> {
        let size = bytes.len() as u64;
        let path = put_bytes(&self.data_dir, sha256, bytes).await?;
        self.upload(&path, sha256, size).await?;
        Ok(path)
    }

    /// Stores the file at `path` (a finished file, such as a packet
    /// archive): hashed while read, copied into the local store and the
    /// database. Returns its SHA-256.
    pub async fn put_file(&self, path: &Path) -> Result<String, BlobError> {
        let mut file = tokio::fs::File::open(path).await?;
        let mut writer = self.writer(u64::MAX).await?;
        let mut buf = vec![0u8; CHUNK_BYTES];
        loop {
            let n = file.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            writer.write(&buf[..n]).await?;
        }
        let pending = writer.finish().await?;
        let sha256 = pending.sha256.clone();
        pending.commit().await?;
        Ok(sha256)
    }

    /// A local file holding the blob: the cached copy, or (when the
    /// database keeps blobs) one fetched from the database chunk by chunk
    /// into the cache, its size and digest checked before it is visible.
    /// `None` when the blob is stored nowhere.
    pub async fn local_copy(&self, sha256: &str) -> Result<Option<PathBuf>, BlobError> {
        let dest = blob_path(&self.data_dir, sha256);
        if tokio::fs::try_exists(&dest).await? {
            return Ok(Some(dest));
        }
        if !self.in_db() {
            return Ok(None);
        }
        let Some((size, chunks)) = self.db.blob_meta(sha256).await? else { return Ok(None) };
        let damaged = |why: String| BlobError::Damaged { sha256: sha256.to_string(), why };
        let mut writer = BlobWriter::create(self, u64::MAX).await?;
        for seq in 0..chunks {
            let bytes = self
                .db
                .blob_chunk(sha256, seq)
                .await?
                .ok_or_else(|| damaged(format!("chunk {seq} of {chunks} is missing")))?;
            writer.write(&bytes).await?;
        }
        let pending = writer.finish().await?;
        if pending.size != size as u64 || pending.sha256 != sha256 {
            return Err(damaged(format!(
                "its {chunks} chunks hold {} bytes with SHA-256 {}, not {size} bytes",
                pending.size, pending.sha256
            )));
        }
        let path = pending.persist_local().await?;
        Ok(Some(path))
    }

    /// Streams the complete local file `path` into the database as the
    /// blob `sha256`, unless the database keeps no blobs or has it already.
    async fn upload(&self, path: &Path, sha256: &str, size: u64) -> Result<(), BlobError> {
        if !self.in_db() || self.db.blob_meta(sha256).await?.is_some() {
            return Ok(());
        }
        let mut file = tokio::fs::File::open(path).await?;
        let mut buf = vec![0u8; CHUNK_BYTES];
        let mut seq = 0i64;
        loop {
            // Fill the chunk (reads may return less than asked).
            let mut n = 0;
            while n < CHUNK_BYTES {
                let got = file.read(&mut buf[n..]).await?;
                if got == 0 {
                    break;
                }
                n += got;
            }
            if n == 0 {
                break;
            }
            self.db.put_blob_chunk(sha256, seq, &buf[..n]).await?;
            seq += 1;
            if n < CHUNK_BYTES {
                break;
            }
        }
        self.db.finish_blob(sha256, size as i64, seq, crate::now_ms()).await?;
        Ok(())
    }
}

/// The folder holding every blob.
pub fn blobs_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("blobs")
}

/// The folder holding unfinished writes and scratch space for validation.
pub fn tmp_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("tmp")
}

/// Where the blob with this hex SHA-256 lives (whether or not it exists).
pub fn blob_path(data_dir: &Path, sha256: &str) -> PathBuf {
    let prefix = sha256.get(..2).unwrap_or("00");
    blobs_dir(data_dir).join(prefix).join(sha256)
}

/// Removes what unfinished writes left in the temporary folder, for example
/// after the process was killed mid-upload. Only `serve` calls it at start,
/// before it accepts uploads.
pub fn sweep_tmp(data_dir: &Path) -> std::io::Result<usize> {
    let dir = tmp_dir(data_dir);
    let mut removed = 0;
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(0) };
    for entry in entries.flatten() {
        let path = entry.path();
        let result = if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if result.is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// A streaming write in progress. Dropping it removes the temporary file.
pub struct BlobWriter {
    blobs: Blobs,
    file: Option<std::fs::File>,
    tmp: Option<tempfile::TempPath>,
    buffer: Vec<u8>,
    hasher: Sha256,
    size: u64,
    cap: u64,
}

impl BlobWriter {
    /// Starts a write of at most `cap` bytes.
    pub async fn create(blobs: &Blobs, cap: u64) -> Result<BlobWriter, BlobError> {
        let tmp = tmp_dir(&blobs.data_dir);
        let named = blocking(move || {
            std::fs::create_dir_all(&tmp)?;
            tempfile::Builder::new().prefix("upload-").suffix(".part").tempfile_in(&tmp)
        })
        .await?;
        let (file, path) = named.into_parts();
        Ok(BlobWriter {
            blobs: blobs.clone(),
            file: Some(file),
            tmp: Some(path),
            buffer: Vec::with_capacity(BUFFER_BYTES),
            hasher: Sha256::new(),
            size: 0,
            cap,
        })
    }

    /// Bytes accepted so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends `chunk`; over the cap the write is abandoned (the temporary
    /// file is removed) and the error says so.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), BlobError> {
        self.size += chunk.len() as u64;
        if self.size > self.cap {
            self.abort();
            return Err(BlobError::TooLarge { limit: self.cap });
        }
        self.hasher.update(chunk);
        self.buffer.extend_from_slice(chunk);
        if self.buffer.len() >= BUFFER_BYTES {
            self.flush_buffer().await?;
        }
        Ok(())
    }

    async fn flush_buffer(&mut self) -> Result<(), BlobError> {
        let Some(mut file) = self.file.take() else {
            return Err(BlobError::Io(std::io::Error::other("the write was abandoned")));
        };
        let buffer = std::mem::replace(&mut self.buffer, Vec::with_capacity(BUFFER_BYTES));
        let (file, mut buffer) = blocking(move || {
            file.write_all(&buffer)?;
            Ok((file, buffer))
        })
        .await?;
        buffer.clear();
        self.buffer = buffer;
        self.file = Some(file);
        Ok(())
    }

    /// Removes the temporary file now.
    pub fn abort(&mut self) {
        self.file = None;
        if let Some(tmp) = self.tmp.take() {
            let _ = tmp.close();
        }
    }

    /// Finishes the write: flushes and syncs the temporary file. The result
    /// is still invisible until [`PendingBlob::commit`].
    pub async fn finish(mut self) -> Result<PendingBlob, BlobError> {
        self.flush_buffer().await?;
        let file =
            self.file.take().ok_or_else(|| std::io::Error::other("the write was abandoned"))?;
        blocking(move || file.sync_all()).await?;
        let sha256 = hex::encode(std::mem::take(&mut self.hasher).finalize());
        let tmp =
            self.tmp.take().ok_or_else(|| std::io::Error::other("the write was abandoned"))?;
        Ok(PendingBlob { blobs: self.blobs.clone(), tmp: Some(tmp), sha256, size: self.size })
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        self.abort();
    }
}

/// A complete, synced upload not yet in the store. Dropping it removes it.
pub struct PendingBlob {
    blobs: Blobs,
    tmp: Option<tempfile::TempPath>,
    pub sha256: String,
    pub size: u64,
}

impl PendingBlob {
    /// The temporary file, for validation before commit.
    pub fn path(&self) -> &Path {
        self.tmp.as_deref().expect("a pending blob keeps its file until commit or drop")
    }

    /// Renames the file into the store (or drops it when the same content is
    /// already stored), streams it into the database when the database
    /// keeps blobs, and returns the blob's local path.
    pub async fn commit(self) -> Result<PathBuf, BlobError> {
        let blobs = self.blobs.clone();
        let (sha256, size) = (self.sha256.clone(), self.size);
        let path = self.persist_local().await?;
        blobs.upload(&path, &sha256, size).await?;
        Ok(path)
    }

    /// Renames the file into the local folder only.
    async fn persist_local(mut self) -> Result<PathBuf, BlobError> {
        let dest = blob_path(&self.blobs.data_dir, &self.sha256);
        let tmp = self
            .tmp
            .take()
            .ok_or_else(|| std::io::Error::other("the blob was already committed"))?;
        let out = dest.clone();
        blocking(move || move_into_place(tmp, &dest)).await?;
        Ok(out)
    }
}

impl Drop for PendingBlob {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = tmp.close();
        }
    }
}

/// Stores `bytes` (whose SHA-256 is `sha256`) unless the store has them
/// already: written to a temporary file, synced and renamed into place, on
/// a blocking thread. Returns the blob's path.
pub async fn put_bytes(
    data_dir: &Path,
    sha256: &str,
    bytes: axum::body::Bytes,
) -> Result<PathBuf, BlobError> {
    let dest = blob_path(data_dir, sha256);
    let tmp = tmp_dir(data_dir);
    let out = dest.clone();
    blocking(move || {
        if dest.exists() {
            return Ok(());
        }
        std::fs::create_dir_all(&tmp)?;
        let mut named =
            tempfile::Builder::new().prefix("put-").suffix(".part").tempfile_in(&tmp)?;
        named.write_all(&bytes)?;
        named.as_file().sync_all()?;
        move_into_place(named.into_temp_path(), &dest)
    })
    .await?;
    Ok(out)
}

/// Renames the complete, synced temporary file `tmp` to the blob path
/// `dest`, or removes it when `dest` is there already (the same content:
/// blobs are named by their digest). Blocking.
fn move_into_place(tmp: tempfile::TempPath, dest: &Path) -> std::io::Result<()> {
    let parent = dest.parent().expect("blob paths have a parent");
    std::fs::create_dir_all(parent)?;
    if dest.exists() {
        tmp.close()
    } else {
        tmp.persist(dest).map_err(|e| e.error)?;
        // The rename is durable once the folder itself is synced.
        std::fs::File::open(parent)?.sync_all()
    }
}

/// Runs the file work `f` on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| std::io::Error::other(e.to_string()))?
}

/// One blob for the [`BatchWriter`].
struct Put {
    data_dir: PathBuf,
    sha256: String,
    bytes: axum::body::Bytes,
}

/// Writes small blobs (the model meter's transcripts) on a thread of its
/// own, in batches: every blob queued while the last batch was written is
/// written to its temporary file, then all are synced, renamed into place
/// and their folders synced. Each blob keeps `put_bytes`'s guarantee
/// (complete or absent), but a batch costs the file system two journal
/// commits instead of two per blob, and the caller never waits. The thread
/// starts with the first blob and ends (after the queue) when the writer is
/// dropped.
#[derive(Default)]
pub struct BatchWriter {
    queue: std::sync::Mutex<Option<std::sync::mpsc::Sender<Put>>>,
}

/// The most blobs one batch takes.
const BATCH: usize = 256;

impl BatchWriter {
    /// Queues `bytes` as the blob `sha256` of `data_dir`.
    pub fn put(&self, data_dir: &Path, sha256: String, bytes: axum::body::Bytes) {
        let put = Put { data_dir: data_dir.to_path_buf(), sha256, bytes };
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let put = match queue.as_ref() {
            Some(q) => match q.send(put) {
                Ok(()) => return,
                // The thread is gone (it panicked): start another.
                Err(std::sync::mpsc::SendError(put)) => put,
            },
            None => put,
        };
        let (tx, rx) = std::sync::mpsc::channel::<Put>();
        let spawned = std::thread::Builder::new().name("blob-writer".into()).spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut batch = vec![first];
                while batch.len() < BATCH {
                    match rx.try_recv() {
                        Ok(p) => batch.push(p),
                        Err(_) => break,
                    }
                }
                write_batch(batch);
            }
        });
        match spawned {
            Ok(_) => {
                let _ = tx.send(put);
                *queue = Some(tx);
            }
            Err(e) => {
                tracing::error!(error = %e, "starting the blob writer thread failed; the blob is not kept")
            }
        }
    }
}

/// `p`'s bytes in a new temporary file (not synced yet), its folder made.
fn write_unsynced(p: &Put, dest: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    std::fs::create_dir_all(dest.parent().expect("blob paths have a parent"))?;
    let tmp = tmp_dir(&p.data_dir);
    std::fs::create_dir_all(&tmp)?;
    let mut named = tempfile::Builder::new().prefix("put-").suffix(".part").tempfile_in(&tmp)?;
    named.write_all(&p.bytes)?;
    Ok(named)
}

fn write_batch(batch: Vec<Put>) {
    let failed = |p: &Put, e: &std::io::Error| {
        metrics::counter!("gatehouse_transcript_write_failures_total").increment(1);
        tracing::error!(error = %e, blob = %p.sha256, "keeping a blob failed");
    };
    // Written (not yet synced) temporary files, with where they go.
    let mut written = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in batch {
        let dest = blob_path(&p.data_dir, &p.sha256);
        if dest.exists() || !seen.insert(dest.clone()) {
            continue;
        }
        match write_unsynced(&p, &dest) {
            Ok(named) => written.push((p, dest, named)),
            Err(e) => failed(&p, &e),
        }
    }
    // The first sync commits the data of all (ext4 and the like journal
    // them together); the others find theirs done.
    let mut synced = Vec::new();
    for (p, dest, named) in written {
        match named.as_file().sync_all() {
            Ok(()) => synced.push((p, dest, named)),
            Err(e) => failed(&p, &e),
        }
    }
    let mut folders = std::collections::BTreeSet::new();
    for (p, dest, named) in synced {
        match named.persist(&dest) {
            Ok(_) => {
                folders.insert(dest.parent().expect("blob paths have a parent").to_path_buf());
            }
            Err(e) => failed(&p, &e.error),
        }
    }
    for folder in folders {
        if let Err(e) = std::fs::File::open(&folder).and_then(|f| f.sync_all()) {
            metrics::counter!("gatehouse_transcript_write_failures_total").increment(1);
            tracing::error!(error = %e, folder = %folder.display(), "syncing a blob folder failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_blobs_land_complete_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let writer = BatchWriter::default();
        let mut expect = Vec::new();
        for i in 0..300 {
            // Every third blob repeats the one before it (a duplicate in one batch or the next).
            let body = format!("blob {}", if i % 3 == 2 { i - 1 } else { i });
            let digest = hex::encode(Sha256::digest(body.as_bytes()));
            writer.put(dir.path(), digest.clone(), axum::body::Bytes::from(body.clone()));
            expect.push((digest, body));
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        for (digest, body) in &expect {
            let path = blob_path(dir.path(), digest);
            while !path.exists() {
                assert!(std::time::Instant::now() < deadline, "blob {digest} never written");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            assert_eq!(std::fs::read_to_string(&path).unwrap(), *body);
        }
        drop(writer);
        let distinct: std::collections::HashSet<_> = expect.iter().map(|(d, _)| d).collect();
        let stored: usize = std::fs::read_dir(blobs_dir(dir.path()))
            .unwrap()
            .map(|d| std::fs::read_dir(d.unwrap().path()).unwrap().count())
            .sum();
        assert_eq!(stored, distinct.len(), "each blob once");
        assert_eq!(
            std::fs::read_dir(tmp_dir(dir.path())).unwrap().count(),
            0,
            "no temporary file left"
        );
    }

    #[tokio::test]
    async fn writes_commit_and_caps() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            crate::db::open(&format!("sqlite://{}/db.sqlite", dir.path().display())).await.unwrap();
        let blobs = Blobs::new(dir.path(), db);
        assert!(!blobs.in_db(), "SQLite keeps blobs in the folder");
        let mut w = BlobWriter::create(&blobs, 10).await.unwrap();
        w.write(b"hello").await.unwrap();
        let pending = w.finish().await.unwrap();
        assert_eq!(pending.size, 5);
        let path = pending.commit().await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"hello");
        assert_eq!(std::fs::read_dir(tmp_dir(dir.path())).unwrap().count(), 0);

        let mut w = BlobWriter::create(&blobs, 4).await.unwrap();
        assert!(matches!(w.write(b"hello").await, Err(BlobError::TooLarge { limit: 4 })));
        drop(w);
        assert_eq!(std::fs::read_dir(tmp_dir(dir.path())).unwrap().count(), 0);
    }
}
