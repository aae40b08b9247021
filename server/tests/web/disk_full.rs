//! Disk full (#29), on filesystems the tests make small (size-capped
//! tmpfs): the data folder, SQLite's database file, a worker's own data
//! folder (Postgres) and the grader's work folder. An upload that does not
//! fit is refused with 507 and a clear error, and leaves no partial blob,
//! row or temporary file; a grading that cannot write is retried later,
//! never failed, refused or lost; everything resumes by itself when space
//! returns.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use app::contract::JobKind;
use gatehouse::state::AppState;

use crate::candidate::{files_under, upload_blobs};
use crate::children::{Server, SmallDisk, Workers};
use crate::ops::{
    Uploaded, answer_zip, publish_soak_packet, publish_soak_packet_running, soak_assignments,
    upload_answer,
};
use crate::support::TestApp;

/// A zip that does not compress: `n` bytes of noise beside the answer.
fn big_answer_zip(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let noise: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    crate::candidate::zip_of(&[("answer.txt", b"42\n"), ("noise.bin", &noise)])
}

const FULL: &str = "the server is out of disk space";

async fn integrity_ok(url: &str) {
    if url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let r: String =
            sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&pool).await.unwrap();
        pool.close().await;
        assert_eq!(r, "ok", "the database stays consistent");
    }
}

async fn submission_count(state: &AppState, assignment: &str) -> usize {
    state.db.submissions_of(assignment).await.unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_that_does_not_fit_is_refused_with_507_leaves_nothing_and_space_returning_resumes()
 {
    let disks = tempfile::tempdir().unwrap();
    let data = SmallDisk::mount(&disks.path().join("data"), 8 << 20);
    let db_disk = SmallDisk::mount(&disks.path().join("db"), 8 << 20);
    let sqlite = !crate::postgres::selected();
    let app = TestApp::spawn_with(|c| {
        c.data_dir = data.dir.clone();
        if sqlite {
            c.database_url = format!("sqlite://{}", db_disk.dir.join("gatehouse.db").display());
        }
    })
    .await;
    let url = app.state.config.database_url.clone();
    publish_soak_packet(&app.state).await;
    let a = soak_assignments(&app.state, &url, 1, 20).await.remove(0);
    let zip = big_answer_zip(512 << 10, 1);
    let tmp = gatehouse::blobs::tmp_dir(&app.state.config.data_dir);
    let blobs_before = upload_blobs(&app.state).await;

    // The data folder's disk is full: the upload does not fit.
    let filler = data.fill("filler", 64 << 10);
    match upload_answer(&app.base, &a.token, zip.clone()).await {
        Uploaded::Refused(507, msg) => assert!(msg.contains(FULL), "{msg}"),
        Uploaded::Refused(s, m) => panic!("refused with {s}: {m}"),
        Uploaded::Accepted(id) => panic!("accepted {id} on a full disk"),
        Uploaded::Unreachable(e) => panic!("{e}"),
    }
    // The plain form says the same on the candidate's page.
    let r = TestApp::client()
        .post(app.url(&format!("/c/{}/submit", a.token)))
        .multipart(crate::candidate::form(zip.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 507);
    assert!(r.text().await.unwrap().contains(FULL));
    assert_eq!(files_under(&tmp), Vec::<PathBuf>::new(), "no partial upload left");
    assert_eq!(upload_blobs(&app.state).await, blobs_before, "no blob");
    assert_eq!(submission_count(&app.state, &a.assignment.id).await, 0, "no row");
    assert!(app.state.db.pending_jobs().await.unwrap().is_empty(), "no job");
    integrity_ok(&url).await;

    // Space returns: the same upload is accepted.
    std::fs::remove_file(&filler).unwrap();
    let Uploaded::Accepted(first) = upload_answer(&app.base, &a.token, zip.clone()).await else {
        panic!("refused once space returned")
    };
    if !sqlite {
        eprintln!("the database's own disk is Postgres's; its disk-full case is not made here");
        return;
    }

    // SQLite's disk is full: the blob fits, the row does not. The upload is
    // refused with 507, and the blob it stored is taken back.
    let other = big_answer_zip(256 << 10, 2);
    let other_sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&other));
    let db_filler = db_disk.fill("filler", 0);
    match upload_answer(&app.base, &a.token, other.clone()).await {
        Uploaded::Refused(507, msg) => assert!(msg.contains(FULL), "{msg}"),
        Uploaded::Refused(s, m) => panic!("refused with {s}: {m}"),
        Uploaded::Accepted(id) => panic!("accepted {id} with the database's disk full"),
        Uploaded::Unreachable(e) => panic!("{e}"),
    }
    assert!(!upload_blobs(&app.state).await.contains(&other_sha), "the blob was taken back");
    assert_eq!(files_under(&tmp), Vec::<PathBuf>::new());
    assert_eq!(submission_count(&app.state, &a.assignment.id).await, 1, "no new row");
    std::fs::remove_file(&db_filler).unwrap();
    integrity_ok(&url).await;
    let Uploaded::Accepted(second) = upload_answer(&app.base, &a.token, other).await else {
        panic!("refused once space returned")
    };
    assert_ne!(first, second);
    assert_eq!(submission_count(&app.state, &a.assignment.id).await, 2);
}

/// Waits until `id`'s submission is in `state`.
async fn wait_state(app: &AppState, id: &str, state: &str, limit: Duration) {
    let t0 = Instant::now();
    loop {
        let s = app.db.submission_by_id(id).await.unwrap().unwrap();
        if s.state.as_str() == state {
            return;
        }
        assert!(t0.elapsed() < limit, "{id} still {} ({:?}), not {state}", s.state, s.error);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many grading results were held back for want of storage (the
/// process's metrics; the counter is the process's, so it is compared).
fn delayed(state: &AppState) -> u64 {
    state
        .metrics
        .render()
        .lines()
        .find(|l| l.starts_with("gatehouse_results_delayed_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// SQLite: the database's disk fills while a grading runs, so its result
/// cannot be written. The worker keeps the result and stores it once there
/// is room: graded once, on its first attempt. Postgres: a worker whose own
/// data folder is full cannot fetch the zip; the job waits (no attempt
/// used) and is graded once there is room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grading_that_cannot_write_is_retried_later_and_resumes_when_space_returns() {
    let disks = tempfile::tempdir().unwrap();
    let db_disk = SmallDisk::mount(&disks.path().join("db"), 8 << 20);
    let worker_disk = SmallDisk::mount(&disks.path().join("worker"), 8 << 20);
    let sqlite = !crate::postgres::selected();
    let app = TestApp::spawn_with(|c| {
        c.lease_secs = 60;
        if sqlite {
            c.database_url = format!("sqlite://{}", db_disk.dir.join("gatehouse.db").display());
        }
    })
    .await;
    let url = app.state.config.database_url.clone();
    // A grading long enough to fill the disk under it.
    publish_soak_packet_running(&app.state, "sleep 2; grep -q 42 answer.txt").await;
    let a = soak_assignments(&app.state, &url, 1, 20).await.remove(0);
    let Uploaded::Accepted(id) = upload_answer(&app.base, &a.token, answer_zip(true, "full")).await
    else {
        panic!("refused")
    };
    let worker = if sqlite {
        app.state.clone()
    } else {
        // A worker elsewhere: its own data folder, on the small disk.
        gatehouse::serve::state(gatehouse::config::Config {
            database_url: url.clone(),
            data_dir: worker_disk.dir.join("data"),
            packets_dir: PathBuf::new(),
            builtin_self_test: "off".into(),
            lease_secs: 60,
            ..gatehouse::config::Config::default()
        })
        .await
        .unwrap()
    };
    let filler = if sqlite {
        let _w = gatehouse::queue::spawn_workers(&worker, 1);
        wait_state(&app.state, &id, "grading", Duration::from_secs(60)).await;
        let delayed_before = delayed(&app.state);
        let f = db_disk.fill("filler", 0);
        // The grading ends; its result cannot be written (the worker says
        // so in its metrics), and is kept.
        let t0 = Instant::now();
        while delayed(&app.state) == delayed_before {
            assert!(t0.elapsed() < Duration::from_secs(120), "the result was never held back");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let s = app.state.db.submission_by_id(&id).await.unwrap().unwrap();
        assert_eq!(s.state.as_str(), "grading", "still waiting to be stored: {:?}", s.error);
        let jobs = app.state.db.jobs_for(JobKind::Grade, &id).await.unwrap();
        assert_eq!((jobs[0].state.as_str(), jobs[0].attempts), ("running", 1), "{jobs:?}");
        std::fs::remove_file(&f).unwrap();
        crate::candidate::wait_final(&app.state, &id, Duration::from_secs(120)).await;
        drop(_w);
        None
    } else {
        // The data folder of the worker is full before it fetches the zip
        // (and its packet version).
        let f = worker_disk.fill("filler", 0);
        let w = gatehouse::queue::spawn_workers(&worker, 1);
        // Tried and put back, several times, without using the attempts up.
        let t0 = Instant::now();
        loop {
            let jobs = app.state.db.jobs_for(JobKind::Grade, &id).await.unwrap();
            if jobs[0].last_error.as_deref().is_some_and(|e| e.contains("No space left")) {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "never tried: {jobs:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let s = app.state.db.submission_by_id(&id).await.unwrap().unwrap();
        assert!(!s.state.is_final(), "not failed or refused while the disk is full: {s:?}");
        Some((f, w))
    };
    if let Some((f, w)) = filler {
        std::fs::remove_file(&f).unwrap();
        crate::candidate::wait_final(&app.state, &id, Duration::from_secs(120)).await;
        drop(w);
    }
    let s = app.state.db.submission_by_id(&id).await.unwrap().unwrap();
    assert_eq!(s.state.as_str(), "graded", "{:?}", s.error);
    assert_eq!(s.decision.as_deref(), Some("advance"));
    crate::ops::receipt_verifies(&s).unwrap();
    let jobs = app.state.db.jobs_for(JobKind::Grade, &id).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].state.as_str(), jobs[0].attempts),
        ("done", 1),
        "no attempt used: {jobs:?}"
    );
    integrity_ok(&url).await;
}

/// The grader's work folder (`TMPDIR` of a `gatehouse worker`) fills up:
/// gradings fail there and are queued again, never refused as the
/// candidate's fault and with no attempt used; once there is room they are
/// graded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_work_folder_delays_gradings_and_never_refuses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let work = SmallDisk::mount(&tmp.path().join("work"), 16 << 20);
    let work_tmp = work.dir.join("tmp");
    std::fs::create_dir_all(&work_tmp).unwrap();
    let tmpdir = work_tmp.to_string_lossy().into_owned();
    let (settings, state) = crate::restart::over(
        tmp.path(),
        30,
        &[("GATEHOUSE_MAX_PENDING_JOBS", "50"), ("TMPDIR", tmpdir.as_str())],
    )
    .await;
    publish_soak_packet(&state).await;
    let a = soak_assignments(&state, &settings.database_url, 1, 20).await.remove(0);
    let mut server = Server::new(
        crate::children::Settings {
            env: vec![("GATEHOUSE_MAX_PENDING_JOBS".into(), "50".into())],
            ..settings.clone()
        },
        0,
        tmp.path().join("serve.log"),
    );
    server.start().await;
    let mut workers = Workers::new(settings, tmp.path().join("worker.log"));
    workers.spawn(1);
    // Warm: the worker grades one (and calibrates) while there is room.
    let Uploaded::Accepted(warm) =
        upload_answer(&server.base(), &a.token, answer_zip(true, "warm")).await
    else {
        panic!("refused")
    };
    crate::candidate::wait_final(&state, &warm, Duration::from_secs(120)).await;

    let filler = work.fill("filler", 0);
    let Uploaded::Accepted(id) =
        upload_answer(&server.base(), &a.token, answer_zip(true, "starved")).await
    else {
        panic!("refused")
    };
    let t0 = Instant::now();
    loop {
        let jobs = state.db.jobs_for(JobKind::Grade, &id).await.unwrap();
        if jobs[0].last_error.as_deref().is_some_and(|e| e.contains("No space left")) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "never tried: {jobs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let s = state.db.submission_by_id(&id).await.unwrap().unwrap();
    assert!(!s.state.is_final(), "not failed or refused while the disk is full: {s:?}");
    let leftovers: Vec<_> = std::fs::read_dir(&work_tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gatehouse-grade-"))
        .collect();
    assert!(leftovers.is_empty(), "a failed grading leaves no work folder: {leftovers:?}");

    std::fs::remove_file(&filler).unwrap();
    let s = crate::candidate::wait_final(&state, &id, Duration::from_secs(120)).await;
    assert_eq!(s.state.as_str(), "graded", "{:?} {:?}", s.refusal, s.error);
    crate::ops::receipt_verifies(&s).unwrap();
    let jobs = state.db.jobs_for(JobKind::Grade, &id).await.unwrap();
    assert_eq!((jobs[0].state.as_str(), jobs[0].attempts), ("done", 1), "{jobs:?}");
}
