//! Group commit for the model meter's ledger writes (one row inserted per
//! call admitted, one updated per call settled), and the checkpoints they
//! would otherwise pay for.
//!
//! Every ledger write is queued to one task holding SQLite's writer
//! connection. A write that finds the queue empty runs alone, as its own
//! transaction (a sequential client pays nothing for the queue); writes
//! that queued while the last batch ran are run together in one
//! transaction and acknowledged after its commit, so a burst of concurrent
//! calls costs SQLite one WAL commit per batch instead of one per write.
//! Each write is acknowledged only once it is committed, as before: the
//! meter still forwards a call only after its reservation row is durable.
//! When any write of a batch fails, the batch is rolled back and each of its
//! writes is run again on its own, so one write's error is that write's
//! alone and each result is what the write would have had by itself.
//!
//! The writer connection does not checkpoint the WAL itself
//! (`wal_autocheckpoint = 0`), which would stall the write that crossed the
//! threshold for the copy and its syncs; instead, every
//! [`CHECKPOINT_EVERY`] commits, a `PRAGMA wal_checkpoint(PASSIVE)` runs on
//! a connection of the read pool, beside the writes (the other pool
//! connections keep SQLite's automatic checkpoints).
//!
//! A checkpoint beside a writer that never pauses never reaches the WAL's
//! end (the writer appends while it copies), and SQLite starts the WAL
//! over only when a write begins with every frame copied: under sustained
//! load the file grew without bound (141 MiB in 4 s at 1,200 calls/s,
//! measured by `tests/web/meter/wal.rs`). So once the last checkpoint saw
//! the WAL past [`super::WAL_SIZE_LIMIT`], the next one runs on the writer
//! itself, between two batches: nothing of the ledger writes meanwhile, it
//! copies every frame no reader still needs, and the next write starts the
//! WAL over, cut back to the limit (`journal_size_limit`). Those writes wait
//! for that one copy, once per `WAL_SIZE_LIMIT` of log. A long read
//! transaction still holds the WAL back (SQLite cannot copy past it); it is
//! cut back once the reader is gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sqlx::sqlite::{Sqlite, SqliteArguments, SqlitePool, SqliteQueryResult, SqliteRow};
use tokio::sync::{mpsc, oneshot};

/// A ledger statement with its arguments bound.
pub type Query = sqlx::query::Query<'static, Sqlite, SqliteArguments<'static>>;
/// Builds the statement (again, when its batch failed and it runs alone).
pub type Build = Box<dyn Fn() -> Query + Send + Sync>;

/// The most writes one transaction takes.
const BATCH: usize = 64;
/// Commits of the writer between two checkpoints.
pub const CHECKPOINT_EVERY: u64 = 256;

enum Reply {
    Row(oneshot::Sender<sqlx::Result<SqliteRow>>),
    Done(oneshot::Sender<sqlx::Result<SqliteQueryResult>>),
}

struct Op {
    build: Build,
    reply: Reply,
}

enum Got {
    Row(SqliteRow),
    Done(SqliteQueryResult),
}

impl Op {
    async fn run<'c, E: sqlx::Executor<'c, Database = Sqlite>>(
        &self,
        conn: E,
    ) -> sqlx::Result<Got> {
        match self.reply {
            Reply::Row(_) => (self.build)().fetch_one(conn).await.map(Got::Row),
            Reply::Done(_) => (self.build)().execute(conn).await.map(Got::Done),
        }
    }

    fn answer(self, got: sqlx::Result<Got>) {
        // (A caller that went away no longer wants the answer.)
        match (self.reply, got) {
            (Reply::Row(tx), Ok(Got::Row(row))) => drop(tx.send(Ok(row))),
            (Reply::Done(tx), Ok(Got::Done(done))) => drop(tx.send(Ok(done))),
            (Reply::Row(tx), Err(e)) => drop(tx.send(Err(e))),
            (Reply::Done(tx), Err(e)) => drop(tx.send(Err(e))),
            (Reply::Row(tx), Ok(Got::Done(_))) => drop(tx.send(Err(sqlx::Error::RowNotFound))),
            (Reply::Done(tx), Ok(Got::Row(_))) => drop(tx.send(Err(sqlx::Error::RowNotFound))),
        }
    }
}

/// The queue to the writer task.
pub struct Ledger {
    writer: SqlitePool,
    queue: mpsc::UnboundedSender<Op>,
    #[cfg(test)]
    stats: Arc<Stats>,
}

/// What the writer task has done (for the tests; the counts are also
/// exported as metrics).
#[derive(Debug, Default)]
pub struct Stats {
    /// Writes acknowledged.
    pub writes: AtomicU64,
    /// Transactions committed (a write alone, or a batch).
    pub commits: AtomicU64,
    /// Batches rolled back and run again write by write.
    pub retried: AtomicU64,
    /// Checkpoints finished.
    pub checkpoints: AtomicU64,
    /// Of which run on the writer, the WAL being past its limit.
    pub inline_checkpoints: AtomicU64,
}

impl Ledger {
    /// Starts the writer task (it ends when the ledger is dropped).
    /// `readers` runs the checkpoints.
    pub fn start(writer: SqlitePool, readers: SqlitePool) -> Ledger {
        let (queue, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(Stats::default());
        tokio::spawn(write_batches(writer.clone(), readers, rx, stats.clone()));
        Ledger {
            writer,
            queue,
            #[cfg(test)]
            stats,
        }
    }

    #[cfg(test)]
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Runs a statement that returns one row (`INSERT … RETURNING`).
    pub async fn fetch_one(&self, build: Build) -> sqlx::Result<SqliteRow> {
        let (tx, rx) = oneshot::channel();
        match self.queue.send(Op { build, reply: Reply::Row(tx) }) {
            Ok(()) => rx.await.unwrap_or_else(|_| Err(gone())),
            // The task is gone (its runtime ended): the write runs here.
            Err(mpsc::error::SendError(op)) => (op.build)().fetch_one(&self.writer).await,
        }
    }

    /// Runs a statement for its effect.
    pub async fn execute(&self, build: Build) -> sqlx::Result<SqliteQueryResult> {
        let (tx, rx) = oneshot::channel();
        match self.queue.send(Op { build, reply: Reply::Done(tx) }) {
            Ok(()) => rx.await.unwrap_or_else(|_| Err(gone())),
            Err(mpsc::error::SendError(op)) => (op.build)().execute(&self.writer).await,
        }
    }
}

fn gone() -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::other("the ledger's writer task stopped before answering"))
}

async fn write_batches(
    writer: SqlitePool,
    readers: SqlitePool,
    mut rx: mpsc::UnboundedReceiver<Op>,
    stats: Arc<Stats>,
) {
    let checkpointing = Arc::new(AtomicBool::new(false));
    // Frames in the WAL at the last checkpoint, and the page size.
    let wal_frames = Arc::new(AtomicU64::new(0));
    let mut page_size: Option<u64> = None;
    let (mut commits, mut last_checkpoint) = (0u64, 0u64);
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        let (n, before) = (batch.len() as u64, commits);
        if batch.len() == 1 {
            alone(batch.pop().expect("one write"), &writer).await;
            commits += 1;
        } else {
            match together(&writer, &batch).await {
                Ok(results) => {
                    batch.drain(..).zip(results).for_each(|(op, got)| op.answer(Ok(got)));
                    commits += 1;
                }
                Err(e) => {
                    tracing::debug!(error = %e, writes = n, "a ledger batch failed; its writes run one by one");
                    stats.retried.fetch_add(1, Ordering::Relaxed);
                    for op in batch.drain(..) {
                        alone(op, &writer).await;
                        commits += 1;
                    }
                }
            }
        }
        stats.writes.fetch_add(n, Ordering::Relaxed);
        stats.commits.store(commits, Ordering::Relaxed);
        metrics::counter!("gatehouse_ledger_writes_total").increment(n);
        metrics::counter!("gatehouse_ledger_commits_total").increment(commits - before);
        if commits - last_checkpoint < CHECKPOINT_EVERY {
            continue;
        }
        if page_size.is_none() {
            page_size = sqlx::query_scalar::<_, i64>("PRAGMA page_size")
                .fetch_one(&writer)
                .await
                .ok()
                .map(|p| p.max(512) as u64);
        }
        let over =
            wal_frames.load(Ordering::Relaxed) * page_size.unwrap_or(4096) > super::WAL_SIZE_LIMIT;
        if over && !checkpointing.load(Ordering::Acquire) {
            last_checkpoint = commits;
            checkpoint(&writer, &wal_frames, &stats).await;
            stats.inline_checkpoints.fetch_add(1, Ordering::Relaxed);
        } else if !checkpointing.swap(true, Ordering::AcqRel) {
            last_checkpoint = commits;
            let (readers, checkpointing, stats, wal_frames) =
                (readers.clone(), checkpointing.clone(), stats.clone(), wal_frames.clone());
            tokio::spawn(async move {
                checkpoint(&readers, &wal_frames, &stats).await;
                checkpointing.store(false, Ordering::Release);
            });
        }
    }
}

/// A passive checkpoint on `pool`; notes the WAL's frames it found.
async fn checkpoint(pool: &SqlitePool, wal_frames: &AtomicU64, stats: &Stats) {
    match sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(pool)
        .await
    {
        Ok((_, log, _)) => {
            wal_frames.store(log.max(0) as u64, Ordering::Relaxed);
            stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => tracing::warn!(error = %e, "checkpointing the database's WAL failed"),
    }
}

/// One write as its own transaction, answered.
async fn alone(op: Op, writer: &SqlitePool) {
    let got = op.run(writer).await;
    op.answer(got);
}

/// The writes of `batch` in one transaction: every result, or the first
/// error (then nothing was committed).
async fn together(writer: &SqlitePool, batch: &[Op]) -> sqlx::Result<Vec<Got>> {
    let mut tx = writer.begin().await?;
    let mut out = Vec::with_capacity(batch.len());
    for op in batch {
        out.push(op.run(&mut *tx).await?);
    }
    tx.commit().await?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::Row;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

    use super::*;

    /// A ledger over a real SQLite file with one table whose CHECK refuses
    /// the value "bad"; its writer does not checkpoint on its own.
    async fn ledger(dir: &std::path::Path) -> (Ledger, SqlitePool) {
        let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}/l.db", dir.display()))
            .unwrap()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let readers =
            SqlitePoolOptions::new().max_connections(2).connect_with(opts.clone()).await.unwrap();
        sqlx::query(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL CHECK (v <> 'bad'), pad BLOB)",
        )
        .execute(&readers)
        .await
        .unwrap();
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(opts.pragma("wal_autocheckpoint", "0"))
            .await
            .unwrap();
        (Ledger::start(writer, readers.clone()), readers)
    }

    fn insert(v: &str) -> Build {
        let v = v.to_string();
        Box::new(move || {
            sqlx::query("INSERT INTO t (v, pad) VALUES ($1, zeroblob(3000)) RETURNING id")
                .bind(v.clone())
        })
    }

    /// Writes that queue together commit together, each gets its own
    /// answer, and one failing write fails alone: its batch is rolled back
    /// and run again write by write.
    #[tokio::test(flavor = "current_thread")]
    async fn queued_writes_commit_together_and_a_failure_stays_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, readers) = ledger(dir.path()).await;
        let ledger = Arc::new(ledger);
        // On one thread every task below has sent its write before the
        // writer task runs again: one batch.
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let ledger = ledger.clone();
                tokio::spawn(async move {
                    ledger.fetch_one(insert(&format!("v{i}"))).await.map(|r| r.get::<i64, _>(0))
                })
            })
            .collect();
        let mut ids = Vec::new();
        for t in tasks {
            ids.push(t.await.unwrap().unwrap());
        }
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 40, "each write its own row: {ids:?}");
        let stats = ledger.stats();
        assert_eq!(stats.writes.load(Ordering::Relaxed), 40);
        assert!(
            stats.commits.load(Ordering::Relaxed) < 40,
            "the queued writes were not committed together: {stats:?}"
        );
        assert_eq!(stats.retried.load(Ordering::Relaxed), 0);

        // A batch with a write the table refuses.
        let tasks: Vec<_> = ["ok1", "bad", "ok2"]
            .into_iter()
            .map(|v| {
                let ledger = ledger.clone();
                tokio::spawn(async move {
                    ledger.fetch_one(insert(v)).await.map(|_| ()).map_err(|e| e.to_string())
                })
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
        assert!(
            results[1].as_ref().unwrap_err().contains("CHECK constraint failed"),
            "{results:?}"
        );
        assert_eq!(stats.retried.load(Ordering::Relaxed), 1, "{stats:?}");
        let kept: Vec<String> =
            sqlx::query_scalar("SELECT v FROM t WHERE v IN ('ok1', 'bad', 'ok2') ORDER BY id")
                .fetch_all(&readers)
                .await
                .unwrap();
        assert_eq!(kept, ["ok1", "ok2"]);

        // A write alone answers as a write alone does.
        let done = ledger
            .execute(Box::new(|| sqlx::query("UPDATE t SET v = 'ok3' WHERE v = $1").bind("ok2")))
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 1);
        let err = ledger
            .execute(Box::new(|| sqlx::query("UPDATE t SET v = 'bad' WHERE v = 'ok3'")))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("CHECK constraint failed"), "{err}");
    }

    /// The writer never checkpoints, so its pages reach the database file
    /// only through the checkpoints the ledger runs beside it.
    #[tokio::test]
    async fn the_wal_is_checkpointed_beside_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, _readers) = ledger(dir.path()).await;
        let file = dir.path().join("l.db");
        let size = || std::fs::metadata(&file).unwrap().len();
        let before = size();
        for i in 0..CHECKPOINT_EVERY - 1 {
            ledger.fetch_one(insert(&format!("w{i}"))).await.unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(
            (ledger.stats().checkpoints.load(Ordering::Relaxed), size()),
            (0, before),
            "nothing checkpointed yet"
        );
        ledger.fetch_one(insert("last")).await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while ledger.stats().checkpoints.load(Ordering::Relaxed) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no checkpoint after {CHECKPOINT_EVERY} commits"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        // 256 rows of 3000 bytes each are in the database file now.
        assert!(size() > before + 256 * 3000, "{before} -> {}", size());
    }
}
