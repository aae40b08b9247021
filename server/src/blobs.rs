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
//!
//! Every temporary file is locked (an exclusive `flock`) by the process
//! writing it for as long as it exists ([`locked_temp`]), and every scratch
//! folder under `tmp/` is a `grader::workdir::WorkDir` (a lock beside it),
//! so [`sweep_tmp`] removes what a killed process left there, at start and
//! periodically, without touching a live write of this process or of
//! another one sharing the folder. With Postgres the local `blobs/` folder
//! is a cache: [`evict_cached`] removes blobs the database holds that were
//! not used for a while.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
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
    /// `None` when the blob is stored nowhere. A cached copy's modification
    /// time is moved to now at each use, so [`evict_cached`] keeps what is
    /// in use.
    pub async fn local_copy(&self, sha256: &str) -> Result<Option<PathBuf>, BlobError> {
        let dest = blob_path(&self.data_dir, sha256);
        if tokio::fs::try_exists(&dest).await? {
            if self.in_db() {
                touch(&dest);
            }
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

    /// Takes back a blob a commit added ([`Committed`]) when what was to
    /// refer to it could not be written: the local file and the database's
    /// rows it added, nothing that was there before.
    pub async fn forget(&self, sha256: &str, added: &Committed) -> Result<(), BlobError> {
        if added.new_in_db {
            self.db.delete_blob(sha256).await?;
        }
        if added.new_local {
            match tokio::fs::remove_file(&added.path).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Streams the complete local file `path` into the database as the
    /// blob `sha256`, unless the database keeps no blobs or has it already;
    /// whether it streamed it.
    async fn upload(&self, path: &Path, sha256: &str, size: u64) -> Result<bool, BlobError> {
        if !self.in_db() || self.db.blob_meta(sha256).await?.is_some() {
            return Ok(false);
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
        Ok(true)
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

/// Moves `path`'s modification time to now (best effort): a cache entry's
/// last use.
pub fn touch(path: &Path) {
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// The name prefix of a temporary file not locked yet (made, then locked,
/// then renamed without it): a sweep leaves such a file alone for
/// [`UNLOCKED_GRACE`].
const NEW_PREFIX: &str = ".new-";

/// How long a sweep leaves an entry of `tmp/` that no lock marks live: a
/// file still being made and locked, or a folder of an older version.
pub const UNLOCKED_GRACE: std::time::Duration = std::time::Duration::from_secs(3600);

/// A new temporary file `<tmp>/<prefix>XXXXXX<suffix>` held under an
/// exclusive `flock` for as long as the returned file is open: made under a
/// `.new-` name, locked, then renamed, so a sweep never finds a live file
/// unlocked. Dropping the path removes the file.
pub fn locked_temp(
    tmp: &Path,
    prefix: &str,
    suffix: &str,
) -> std::io::Result<(std::fs::File, tempfile::TempPath)> {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all(tmp)?;
    let named = tempfile::Builder::new()
        .prefix(&format!("{NEW_PREFIX}{prefix}"))
        .suffix(suffix)
        .tempfile_in(tmp)?;
    // SAFETY: flock on the file's own descriptor.
    if unsafe { libc::flock(named.as_file().as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let name = named.path().file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let final_path = tmp.join(name.strip_prefix(NEW_PREFIX).unwrap_or(name));
    let (file, path) = named.into_parts();
    std::fs::rename(&path, &final_path)?;
    // The old name is gone: forget it (nothing to remove there) and own
    // the new one.
    let _ = path.keep();
    Ok((file, tempfile::TempPath::try_from_path(final_path)?))
}

/// What a sweep of the temporary folder removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SweptTmp {
    /// Unfinished writes of dead processes (files no process holds).
    pub files: u64,
    /// Scratch folders of dead processes, and their locks.
    pub folders: u64,
    /// Files and folders marked by no lock, older than [`UNLOCKED_GRACE`].
    pub stale: u64,
}

impl SweptTmp {
    pub fn total(&self) -> u64 {
        self.files + self.folders + self.stale
    }
}

/// Removes what killed processes left in the temporary folder (an upload
/// cut short, a scratch folder of a self-test or a validation): every file
/// no process holds locked, every scratch folder whose lock is free, and
/// what carries no lock at all once older than [`UNLOCKED_GRACE`]. A live
/// write or folder, of this process or another sharing the data folder, is
/// never touched, so it runs at start and periodically. Blocking.
pub fn sweep_tmp(data_dir: &Path) -> SweptTmp {
    use std::os::fd::AsRawFd;
    let dir = tmp_dir(data_dir);
    let mut swept = SweptTmp::default();
    let work = grader::workdir::sweep(&dir);
    swept.folders += work.folders + work.locks;
    let Ok(entries) = std::fs::read_dir(&dir) else { return swept };
    let old = |meta: &std::fs::Metadata| {
        meta.modified()
            .ok()
            .and_then(|m| std::time::SystemTime::now().duration_since(m).ok())
            .is_some_and(|age| age >= UNLOCKED_GRACE)
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.is_dir() {
            // A folder with its lock beside it is the work folders' sweep's.
            let locked = std::fs::symlink_metadata(dir.join(format!("{name}.lock"))).is_ok();
            if !locked && old(&meta) && std::fs::remove_dir_all(&path).is_ok() {
                swept.stale += 1;
            }
            continue;
        }
        if name.ends_with(".lock") || name.ends_with(".lock.tmp") {
            continue;
        }
        if name.starts_with(NEW_PREFIX) || !meta.is_file() {
            if old(&meta) && std::fs::remove_file(&path).is_ok() {
                swept.stale += 1;
            }
            continue;
        }
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        else {
            continue;
        };
        // SAFETY: flock on the opened file's descriptor.
        let free = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if free && std::fs::remove_file(&path).is_ok() {
            swept.files += 1;
        }
    }
    swept
}

/// With the database keeping the blobs (Postgres), removes local copies
/// (`blobs/`, a cache then) not used for `max_age` whose blob the database
/// holds; returns how many. Nothing is removed when the local folder is the
/// store (SQLite).
pub async fn evict_cached(blobs: &Blobs, max_age: std::time::Duration) -> Result<u64, BlobError> {
    if !blobs.in_db() {
        return Ok(0);
    }
    let root = blobs_dir(&blobs.data_dir);
    let old = tokio::task::spawn_blocking(move || {
        let mut old = Vec::new();
        for prefix in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            for entry in std::fs::read_dir(prefix.path()).into_iter().flatten().flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                let unused = meta
                    .modified()
                    .ok()
                    .and_then(|m| std::time::SystemTime::now().duration_since(m).ok())
                    .is_some_and(|age| age >= max_age);
                if meta.is_file() && unused {
                    old.push((entry.file_name().to_string_lossy().into_owned(), entry.path()));
                }
            }
        }
        old
    })
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut removed = 0;
    for (sha256, path) in old {
        // Only what the database holds: a copy that never reached it (an
        // upload whose streaming failed) is no cache entry.
        if blobs.db.blob_meta(&sha256).await?.is_some() && std::fs::remove_file(&path).is_ok() {
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
        let (file, path) = blocking(move || locked_temp(&tmp, "upload-", ".part")).await?;
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
        // The file stays open (and locked) until the blob is committed or dropped.
        let file = blocking(move || file.sync_all().map(|()| file)).await?;
        let sha256 = hex::encode(std::mem::take(&mut self.hasher).finalize());
        let tmp =
            self.tmp.take().ok_or_else(|| std::io::Error::other("the write was abandoned"))?;
        Ok(PendingBlob {
            blobs: self.blobs.clone(),
            tmp: Some(tmp),
            _lock: file,
            sha256,
            size: self.size,
        })
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
    /// The temporary file, open: its lock marks it live to a sweep.
    _lock: std::fs::File,
    pub sha256: String,
    pub size: u64,
}

/// Where [`PendingBlob::commit_new`] put a blob, and what it added.
pub struct Committed {
    pub path: PathBuf,
    /// The local file did not exist before.
    pub new_local: bool,
    /// The database (Postgres) did not hold it before.
    pub new_in_db: bool,
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
        Ok(self.commit_new().await?.path)
    }

    /// [`PendingBlob::commit`], saying whether this commit added the blob
    /// (locally, and to the database), so a caller whose next write fails
    /// can take back what it added ([`Blobs::forget`]).
    pub async fn commit_new(self) -> Result<Committed, BlobError> {
        let blobs = self.blobs.clone();
        let (sha256, size) = (self.sha256.clone(), self.size);
        let (path, new_local) = self.persist_local_new().await?;
        let new_in_db = blobs.upload(&path, &sha256, size).await?;
        Ok(Committed { path, new_local, new_in_db })
    }

    /// Renames the file into the local folder only.
    async fn persist_local(self) -> Result<PathBuf, BlobError> {
        Ok(self.persist_local_new().await?.0)
    }

    /// Renames the file into the local folder only; whether it was new there.
    async fn persist_local_new(mut self) -> Result<(PathBuf, bool), BlobError> {
        let dest = blob_path(&self.blobs.data_dir, &self.sha256);
        let tmp = self
            .tmp
            .take()
            .ok_or_else(|| std::io::Error::other("the blob was already committed"))?;
        let out = dest.clone();
        let new = blocking(move || move_into_place(tmp, &dest)).await?;
        Ok((out, new))
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
        let (mut file, path) = locked_temp(&tmp, "put-", ".part")?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        move_into_place(path, &dest).map(drop)
    })
    .await?;
    Ok(out)
}

/// Renames the complete, synced temporary file `tmp` to the blob path
/// `dest`, or removes it when `dest` is there already (the same content:
/// blobs are named by their digest); whether it renamed it. Blocking.
fn move_into_place(tmp: tempfile::TempPath, dest: &Path) -> std::io::Result<bool> {
    let parent = dest.parent().expect("blob paths have a parent");
    std::fs::create_dir_all(parent)?;
    if dest.exists() {
        tmp.close().map(|()| false)
    } else {
        tmp.persist(dest).map_err(|e| e.error)?;
        // The rename is durable once the folder itself is synced.
        std::fs::File::open(parent)?.sync_all().map(|()| true)
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
    /// Marks the blob as being written until the batch is done with it.
    _writing: Writing,
}

/// The digests of blobs being written (queued, or on their way into the
/// store), each with how many writes of it are under way, and a wake-up
/// for those waiting on one to land.
#[derive(Default)]
pub struct InFlight {
    digests: std::sync::Mutex<std::collections::HashMap<String, usize>>,
    landed: tokio::sync::Notify,
}

/// A write of one blob under way, until dropped (written, or failed).
pub struct Writing {
    in_flight: std::sync::Arc<InFlight>,
    sha256: String,
}

impl Drop for Writing {
    fn drop(&mut self) {
        {
            let mut digests = self.in_flight.digests.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = digests.get_mut(&self.sha256) {
                *n -= 1;
                if *n == 0 {
                    digests.remove(&self.sha256);
                }
            }
        }
        self.in_flight.landed.notify_waiters();
    }
}

impl InFlight {
    fn any(&self, shas: &[&str]) -> bool {
        let digests = self.digests.lock().unwrap_or_else(|e| e.into_inner());
        shas.iter().any(|s| digests.contains_key(*s))
    }
}

/// Writes small blobs (the model meter's transcripts) on a thread of its
/// own, in batches: every blob queued while the last batch was written is
/// written to its temporary file, then all are synced, renamed into place
/// and their folders synced. Each blob keeps `put_bytes`'s guarantee
/// (complete or absent), but a batch costs the file system two journal
/// commits instead of two per blob, and the caller never waits. The thread
/// starts with the first blob and ends (after the queue) when the writer is
/// dropped.
///
/// It also keeps which blobs are being written ([`BatchWriter::writing`]
/// marks a write made elsewhere, the meter's to the database): an erasure
/// waits for its candidate's to land ([`BatchWriter::written`]) before it
/// removes them, so no transcript arrives after it.
#[derive(Default)]
pub struct BatchWriter {
    queue: std::sync::Mutex<Option<std::sync::mpsc::Sender<Put>>>,
    in_flight: std::sync::Arc<InFlight>,
}

/// The most blobs one batch takes.
const BATCH: usize = 256;

impl BatchWriter {
    /// Marks blob `sha256` as being written until the mark is dropped.
    pub fn writing(&self, sha256: &str) -> Writing {
        let mut digests = self.in_flight.digests.lock().unwrap_or_else(|e| e.into_inner());
        *digests.entry(sha256.to_string()).or_default() += 1;
        Writing { in_flight: self.in_flight.clone(), sha256: sha256.to_string() }
    }

    /// Waits until no write of any of `shas` is under way (at most
    /// `limit`); whether none is.
    pub async fn written(&self, shas: &[&str], limit: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Registered before the check, so a write landing between the
            // two still wakes this.
            let landed = self.in_flight.landed.notified();
            if !self.in_flight.any(shas) {
                return true;
            }
            if tokio::time::timeout_at(deadline, landed).await.is_err() {
                return !self.in_flight.any(shas);
            }
        }
    }

    /// Queues `bytes` as the blob `sha256` of `data_dir`.
    pub fn put(&self, data_dir: &Path, sha256: String, bytes: axum::body::Bytes) {
        let _writing = self.writing(&sha256);
        let put = Put { data_dir: data_dir.to_path_buf(), sha256, bytes, _writing };
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
fn write_unsynced(p: &Put, dest: &Path) -> std::io::Result<(std::fs::File, tempfile::TempPath)> {
    std::fs::create_dir_all(dest.parent().expect("blob paths have a parent"))?;
    let (mut file, path) = locked_temp(&tmp_dir(&p.data_dir), "put-", ".part")?;
    file.write_all(&p.bytes)?;
    Ok((file, path))
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
    for (p, dest, (file, path)) in written {
        match file.sync_all() {
            Ok(()) => synced.push((p, dest, file, path)),
            Err(e) => failed(&p, &e),
        }
    }
    let mut folders = std::collections::BTreeSet::new();
    for (p, dest, _lock, path) in synced {
        match path.persist(&dest) {
            Ok(()) => {
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
