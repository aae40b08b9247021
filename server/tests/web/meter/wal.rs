//! SQLite's write-ahead log stays bounded under the meter's load (#29),
//! though the meter's writer never checkpoints (its checkpoints run beside
//! it, `db::sqlite::ledger`): concurrent clients call the meter without a
//! pause while a long read transaction is held open beside them, then
//! closed. With the load alone the WAL stays under twice
//! [`gatehouse::db::sqlite::WAL_SIZE_LIMIT`]; SQLite cannot checkpoint past
//! an open reader, so while it is open the WAL grows by what is written
//! meanwhile (reported); once it closes the WAL is checkpointed, started
//! over and cut back under the bound while the load goes on.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use sqlx::Connection;

use super::*;

fn wal_of(url: &str) -> PathBuf {
    let opts = sqlx::sqlite::SqliteConnectOptions::from_str(url).unwrap();
    let mut p = opts.get_filename().as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

fn size(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// Samples the WAL's size every 20 ms for `d`: (largest, last).
async fn watch(wal: &std::path::Path, d: Duration) -> (u64, u64) {
    let (start, mut max, mut last) = (Instant::now(), 0, 0);
    while start.elapsed() < d {
        last = size(wal);
        max = max.max(last);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (max, last)
}

const MIB: u64 = 1 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_stays_bounded_under_meter_load_with_a_long_read_transaction() {
    if crate::postgres::selected() {
        eprintln!("SQLite's WAL; Postgres checkpoints its own");
        return;
    }
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 100000000", false, |_| {}).await;
    let db_url = m.app.state.config.database_url.clone();
    let wal = wal_of(&db_url);
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for t in 0..8 {
        let (base, key, stop, calls) =
            (m.app.url("/v1/chat/completions"), m.key.clone(), stop.clone(), calls.clone());
        clients.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = client
                    .post(&base)
                    .bearer_auth(&key)
                    .json(&chat(&format!("load {t} {i}")))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
                calls.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        }));
    }
    let rate = |from: usize, secs: f64| (calls.load(Ordering::Relaxed) - from) as f64 / secs;

    // Load alone.
    let c0 = calls.load(Ordering::Relaxed);
    let (alone, _) = watch(&wal, Duration::from_secs(4)).await;
    let alone_rate = rate(c0, 4.0);

    // A long read transaction beside it (a report, a backup's snapshot).
    let mut reader = sqlx::SqliteConnection::connect(&db_url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut reader).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM model_calls")
        .fetch_one(&mut reader)
        .await
        .unwrap();
    assert!(n > 0);
    let c1 = calls.load(Ordering::Relaxed);
    let (held, _) = watch(&wal, Duration::from_secs(5)).await;
    let held_calls = calls.load(Ordering::Relaxed) - c1;
    sqlx::query("COMMIT").execute(&mut reader).await.unwrap();
    reader.close().await.unwrap();

    // Closed: the load goes on.
    let c2 = calls.load(Ordering::Relaxed);
    let (_, _) = watch(&wal, Duration::from_secs(4)).await;
    let (after, last) = watch(&wal, Duration::from_secs(2)).await;
    let after_rate = rate(c2, 6.0);
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    eprintln!(
        "WAL under meter load: {:.1} MiB at most with the load alone ({alone_rate:.0} calls/s); \
         {:.1} MiB at most while a read transaction was open for 5 s ({held_calls} calls); \
         {:.1} MiB at most 4 to 6 s after it closed ({after_rate:.0} calls/s), {:.1} MiB at the end",
        alone as f64 / MIB as f64,
        held as f64 / MIB as f64,
        after as f64 / MIB as f64,
        last as f64 / MIB as f64,
    );
    // The bound: twice the limit (the limit, and what is written between
    // the checkpoint that sees the WAL past it and the one on the writer).
    // Measured here: 23 MiB with the load alone and after the reader, 184
    // MiB while it was open; before the checkpoints on the writer, 141 MiB
    // after 4 s and 518 MiB after 15 s, growing without end.
    let bound = 2 * gatehouse::db::sqlite::WAL_SIZE_LIMIT;
    assert!(alone <= bound, "the load alone: {alone} bytes");
    assert!(after <= bound, "once the reader closed: {after} bytes");
    assert!(last <= bound, "at the end: {last} bytes");
}
