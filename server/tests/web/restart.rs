//! A server restarted mid-queue loses nothing, and how long an idle worker
//! process takes to wake when a job is queued (#29), on both backends:
//! real `gatehouse serve` and `gatehouse worker` processes.

use std::path::Path;
use std::time::{Duration, Instant};

use gatehouse::config::Config;
use gatehouse::state::AppState;

use crate::children::{Server, Settings, Workers};
use crate::ops::{
    Uploaded, answer_zip, graded_exactly_once, publish_soak_packet, soak_assignments,
    upload_answer, wait_all_final,
};

/// Settings of the children over `dir`, and an in-process app state over
/// the same database and data folder (to set up and to check).
pub async fn over(dir: &Path, lease_secs: u64, env: &[(&str, &str)]) -> (Settings, AppState) {
    let settings = Settings {
        database_url: crate::support::database_url(dir).await,
        data_dir: dir.join("data"),
        lease_secs,
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    };
    let state = gatehouse::serve::state(Config {
        database_url: settings.database_url.clone(),
        data_dir: settings.data_dir.clone(),
        packets_dir: std::path::PathBuf::new(),
        builtin_self_test: "off".into(),
        lease_secs,
        ..Config::default()
    })
    .await
    .unwrap();
    (settings, state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_mid_queue_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (settings, state) = over(tmp.path(), 2, &[("GATEHOUSE_MAX_PENDING_JOBS", "50")]).await;
    publish_soak_packet(&state).await;
    let assignments = soak_assignments(&state, &settings.database_url, 3, 20).await;
    let mut server = Server::new(settings, 1, tmp.path().join("serve.log"));
    server.start().await;
    let mut ids = Vec::new();
    for i in 0..12 {
        let a = &assignments[i % 3];
        match upload_answer(&server.base(), &a.token, answer_zip(i % 4 != 0, &format!("n{i}")))
            .await
        {
            Uploaded::Accepted(id) => ids.push(id),
            Uploaded::Refused(s, m) => panic!("upload {i} refused: {s} {m}"),
            Uploaded::Unreachable(e) => panic!("upload {i}: {e}"),
        }
    }
    // Kill the server while its worker holds a job and others wait.
    let start = Instant::now();
    let (running, queued) = loop {
        let jobs = state.db.pending_jobs().await.unwrap();
        let running = jobs.iter().filter(|j| j.state.as_str() == "running").count();
        let queued = jobs.iter().filter(|j| j.state.as_str() == "queued").count();
        if running == 1 && queued >= 3 {
            break (running, queued);
        }
        assert!(queued >= 3, "the queue drained before the kill: {jobs:?}");
        assert!(start.elapsed() < Duration::from_secs(60), "no job was claimed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    server.kill9();
    let pending = state.db.pending_jobs().await.unwrap();
    assert!(pending.len() > queued.min(3), "killed mid-queue: {running} running, {pending:?}");

    server.start().await;
    let subs = wait_all_final(&state, &ids, Duration::from_secs(240)).await;
    let attempts = graded_exactly_once(&state, &subs).await;
    assert!(attempts.values().all(|a| (1..=2).contains(a)), "{attempts:?}");
    assert_eq!(
        attempts.values().filter(|a| **a == 2).count(),
        1,
        "only the job in flight ran twice"
    );
    let decisions: Vec<_> = subs.values().map(|s| s.decision.clone().unwrap_or_default()).collect();
    assert_eq!(decisions.iter().filter(|d| *d == "close").count(), 3, "{decisions:?}");
    assert!(state.db.pending_jobs().await.unwrap().is_empty());
}

/// Percentile `p` (0..=100) of sorted `v`.
fn pct(v: &[u128], p: usize) -> u128 {
    v[((v.len() - 1) * p / 100).min(v.len() - 1)]
}

/// The wake-up of an idle worker process when a job is queued by another
/// process: with Postgres the `jobs` trigger's NOTIFY wakes it at once (its
/// poll, every 3 s, is only the fallback); with SQLite it polls every 1 s.
/// Measured from the job's creation (just before its transaction commits)
/// to its claim (the lease's start), both the database's stored times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_process_wakes_promptly_when_a_job_is_queued() {
    let tmp = tempfile::tempdir().unwrap();
    let (settings, state) = over(tmp.path(), 30, &[("GATEHOUSE_MAX_PENDING_JOBS", "50")]).await;
    publish_soak_packet(&state).await;
    let a = soak_assignments(&state, &settings.database_url, 1, 100).await.remove(0);
    let mut server = Server::new(settings.clone(), 0, tmp.path().join("serve.log"));
    server.start().await;
    let mut workers = Workers::new(settings, tmp.path().join("worker.log"));
    workers.spawn(1);
    // One job first, so the worker is up, calibrated and idle.
    let mut waits = Vec::new();
    let mut seed = 0x9e37_79b9_u64;
    for i in 0..13 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Off the poll's beat.
        tokio::time::sleep(Duration::from_millis(200 + seed % 900)).await;
        let Uploaded::Accepted(id) =
            upload_answer(&server.base(), &a.token, answer_zip(true, &format!("w{i}"))).await
        else {
            panic!("upload {i} refused")
        };
        let t0 = Instant::now();
        let jobs = loop {
            let jobs = state.db.jobs_for(app::contract::JobKind::Grade, &id).await.unwrap();
            if jobs[0].state.as_str() != "queued" {
                break jobs;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "job {} never claimed", jobs[0].id);
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        // The claim's own time, where the job was seen running: its lease
        // ends a lease length after it (not yet renewed), and the job was
        // created just before its transaction committed.
        let j = &jobs[0];
        let waited = match (j.state.as_str(), j.lease_until) {
            ("running", Some(until)) => (until - 30_000 - j.created_at).max(0) as u128,
            _ => t0.elapsed().as_millis(),
        };
        assert_eq!(jobs.len(), 1);
        if i > 0 {
            waits.push(waited);
        }
        crate::candidate::wait_final(&state, &id, Duration::from_secs(60)).await;
    }
    waits.sort();
    let (median, p90, max) = (pct(&waits, 50), pct(&waits, 90), pct(&waits, 100));
    eprintln!(
        "wake-up of an idle worker process ({}): median {median} ms, p90 {p90} ms, max {max} ms over {} jobs: {waits:?}",
        crate::support::backend(),
        waits.len()
    );
    if crate::postgres::selected() {
        // NOTIFY: well under the 3 s fallback poll's average of 1.5 s.
        assert!(median < 250 && max < 1000, "NOTIFY wake-up: {waits:?}");
    } else {
        // The 1 s poll: never much over it.
        assert!(max < 1800, "polling wake-up: {waits:?}");
        assert!(median > 50, "SQLite workers of another process only poll: {waits:?}");
    }
}
