//! Uploads against the real `gatehouse serve` binary run as a child process:
//! memory stays flat for a 200 MB upload, and a kill -9 mid-upload or
//! mid-grading loses nothing accepted and leaves nothing half-done.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gatehouse::config::Config;
use gatehouse::invites::Invited;
use gatehouse::state::AppState;

use crate::candidate::{files_under, invite, publish_packet, sample_zip, wait_final};
use crate::support::{TestApp, repo_root};

/// A `gatehouse serve` child over a data directory that outlives restarts.
struct Served {
    dir: PathBuf,
    /// Removes `dir` when the test ends.
    _tmp: tempfile::TempDir,
    database_url: String,
    port: u16,
    workers: usize,
    lease_secs: u64,
    child: Option<Child>,
}

impl Served {
    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Uploads the sample with the link `token`; the new submission's id.
    async fn upload_sample(&self, token: &str) -> String {
        let r = crate::candidate::upload(&self.base(), token, sample_zip(), true).await;
        assert_eq!(r.status(), 201);
        r.json::<serde_json::Value>().await.unwrap()["id"].as_str().unwrap().to_string()
    }

    fn config(&self) -> Config {
        Config {
            listen: format!("127.0.0.1:{}", self.port).parse().unwrap(),
            public_url: self.base(),
            database_url: self.database_url.clone(),
            data_dir: self.dir.join("data"),
            packets_dir: PathBuf::new(),
            site_dir: repo_root().join("target/site"),
            workers: self.workers,
            lease_secs: self.lease_secs,
            ..Config::default()
        }
    }

    async fn start(&mut self) {
        let c = self.config();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("child.log"))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
            // The test binary's own GATEHOUSE_TEST_DATABASE is no setting of the app.
            .env_remove("GATEHOUSE_TEST_DATABASE")
            .env_remove("GATEHOUSE_TEST_PG_STATEMENTS")
            .arg("serve")
            .current_dir(&self.dir)
            .env("GATEHOUSE_LISTEN", c.listen.to_string())
            .env("GATEHOUSE_PUBLIC_URL", &c.public_url)
            .env("GATEHOUSE_DATABASE_URL", &c.database_url)
            .env("GATEHOUSE_DATA_DIR", &c.data_dir)
            .env("GATEHOUSE_PACKETS_DIR", "")
            .env("GATEHOUSE_SITE_DIR", &c.site_dir)
            .env("GATEHOUSE_WORKERS", c.workers.to_string())
            .env("GATEHOUSE_LEASE_SECS", c.lease_secs.to_string())
            .env("GATEHOUSE_LOG", "info,sqlx=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let start = Instant::now();
        loop {
            if let Ok(r) = reqwest::get(format!("{}/healthz", self.base())).await
                && r.status() == 200
            {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the child did not start: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL, no chance to clean up.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("child.log")).unwrap_or_default()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Prepares a temporary data directory with a published packet and `name`
/// invited; returns the child's handle (not started), an in-process state
/// over the same database, and the invitation.
async fn prepare(workers: usize, lease_secs: u64, name: &str) -> (Served, AppState, Invited) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let database_url = crate::support::database_url(&dir).await;
    let served = Served {
        dir,
        _tmp: tmp,
        database_url,
        port: free_port(),
        workers,
        lease_secs,
        child: None,
    };
    let state = gatehouse::serve::state(served.config()).await.unwrap();
    publish_packet(&state).await;
    let invited = invite(&state, name).await;
    (served, state, invited)
}

/// A kernel-reported memory figure of `pid` in KiB (`VmHWM`, `VmRSS`).
fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A stored zip of four 50 MiB entries of pseudo-random bytes (200 MiB).
fn write_big_zip(path: &Path) -> u64 {
    let file = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(std::io::BufWriter::new(file));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut block = vec![0u8; 1 << 20];
    for i in 0..4 {
        z.start_file(format!("data/part{i}.bin"), opts).unwrap();
        for _ in 0..50 {
            for chunk in block.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                chunk.copy_from_slice(&x.to_le_bytes());
            }
            z.write_all(&block).unwrap();
        }
    }
    z.finish().unwrap().flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// A multipart form streaming the file at `path` in 256 KiB chunks.
fn streamed_form(path: &Path, len: u64) -> reqwest::multipart::Form {
    let path = path.to_path_buf();
    let stream = futures_util::stream::unfold(None::<tokio::fs::File>, move |file| {
        let path = path.clone();
        async move {
            use tokio::io::AsyncReadExt;
            let mut file = match file {
                Some(f) => f,
                None => tokio::fs::File::open(&path).await.ok()?,
            };
            let mut buf = vec![0u8; 256 << 10];
            let n = file.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.truncate(n);
            Some((Ok::<_, std::io::Error>(buf), Some(file)))
        }
    });
    let part =
        reqwest::multipart::Part::stream_with_length(reqwest::Body::wrap_stream(stream), len)
            .file_name("big.zip");
    reqwest::multipart::Form::new().part("file", part)
}

#[tokio::test]
async fn a_200_mb_upload_streams_with_flat_memory() {
    let (mut served, state, invited) = prepare(0, 60, "Big Upload").await;
    let zip = served.dir.join("big.zip");
    let len = write_big_zip(&zip);
    assert!(len >= 200 << 20);
    served.start().await;
    let client = TestApp::client();
    // Warm the server up (page rendering, database pool) before measuring.
    let r = client.get(format!("{}/c/{}", served.base(), invited.token)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let before = status_kib(served.pid(), "VmHWM:");

    let started = Instant::now();
    let r = client
        .post(format!("{}/c/{}/submit", served.base(), invited.token))
        .header("accept", "application/json")
        .multipart(streamed_form(&zip, len))
        .send()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let status = r.status();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    let after = status_kib(served.pid(), "VmHWM:");
    let growth_mib = (after.saturating_sub(before)) as f64 / 1024.0;
    let mib_per_s = len as f64 / (1 << 20) as f64 / elapsed.as_secs_f64();
    eprintln!(
        "200 MB upload: {len} bytes in {:.2} s ({mib_per_s:.0} MiB/s, including ingestion check); peak RSS {} MiB before, {} MiB after, growth {growth_mib:.1} MiB",
        elapsed.as_secs_f64(),
        before / 1024,
        after / 1024
    );
    assert!(growth_mib < 64.0, "peak memory grew by {growth_mib:.1} MiB during a 200 MiB upload");

    let s = state.db.submission_by_id(body["id"].as_str().unwrap()).await.unwrap().unwrap();
    assert_eq!(s.size_bytes as u64, len);
    let blob = gatehouse::blobs::blob_path(&state.config.data_dir, &s.blob_sha256);
    assert_eq!(std::fs::metadata(blob).unwrap().len(), len);
    assert_eq!(
        files_under(&gatehouse::blobs::tmp_dir(&state.config.data_dir)),
        Vec::<PathBuf>::new()
    );
}

#[tokio::test]
async fn kill_9_mid_upload_leaves_no_submission_and_no_temp_file() {
    let (mut served, state, invited) = prepare(0, 60, "Interrupted").await;
    served.start().await;

    // Send 8 MiB of a declared 100 MiB upload, then stall.
    let declared: u64 = 100 << 20;
    let stream = futures_util::stream::unfold(0u32, |n| async move {
        if n < 32 {
            Some((Ok::<_, std::io::Error>(vec![b'x'; 256 << 10]), n + 1))
        } else {
            std::future::pending::<()>().await;
            None
        }
    });
    let part =
        reqwest::multipart::Part::stream_with_length(reqwest::Body::wrap_stream(stream), declared)
            .file_name("s.zip");
    let url = format!("{}/c/{}/submit", served.base(), invited.token);
    let uploading = tokio::spawn(async move {
        let _ = TestApp::client()
            .post(url)
            .multipart(reqwest::multipart::Form::new().part("file", part))
            .send()
            .await;
    });
    let tmp = gatehouse::blobs::tmp_dir(&state.config.data_dir);
    let start = Instant::now();
    loop {
        let partial: u64 = files_under(&tmp)
            .iter()
            .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
            .sum();
        if partial > 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the upload never reached the disk");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    served.kill9();
    uploading.abort();
    assert!(!files_under(&tmp).is_empty(), "the killed upload left its temporary file");

    served.start().await;
    assert_eq!(files_under(&tmp), Vec::<PathBuf>::new(), "restart removes unfinished uploads");
    assert!(state.db.submissions_of(&invited.assignment.id).await.unwrap().is_empty());
    // No blob but the packet versions' archives.
    assert_eq!(crate::candidate::upload_blobs(&state).await, Vec::<String>::new());

    // The link still works after the restart.
    served.upload_sample(&invited.token).await;
}

#[tokio::test]
async fn kill_9_mid_grading_is_regraded_exactly_once_after_restart() {
    let (mut served, state, invited) = prepare(1, 2, "Regraded").await;
    served.start().await;
    let id = served.upload_sample(&invited.token).await;

    // Kill the server as soon as its worker holds the job.
    let start = Instant::now();
    loop {
        // The worker claims the job, then marks the submission `grading`;
        // kill only once both are visible.
        let jobs = state.db.jobs_for(app::contract::JobKind::Grade, &id).await.unwrap();
        let sub = state.db.submission_by_id(&id).await.unwrap().unwrap();
        if jobs[0].state.as_str() == "running" && sub.state.as_str() == "grading" {
            break;
        }
        assert!(
            jobs[0].state.as_str() == "queued" || jobs[0].state.as_str() == "running",
            "the job finished before the kill: {}",
            jobs[0].state
        );
        assert!(start.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    served.kill9();
    let s = state.db.submission_by_id(&id).await.unwrap().unwrap();
    assert_eq!(s.state.as_str(), "grading", "killed mid-grading");

    // After the restart the lease expires and the job is claimed again.
    served.start().await;
    let s = wait_final(&state, &id, Duration::from_secs(120)).await;
    assert_eq!(s.state.as_str(), "graded", "{}", served.log());
    let jobs = state.db.jobs_for(app::contract::JobKind::Grade, &id).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].state.as_str(), "done");
    assert_eq!(jobs[0].attempts, 2);
    let subs = state.db.submissions_of(&invited.assignment.id).await.unwrap();
    assert_eq!(subs.len(), 1);
    assert_eq!(subs.iter().filter(|s| s.state.as_str() == "graded").count(), 1);
}

#[tokio::test]
async fn gatehouse_worker_grades_jobs_queued_by_another_process() {
    // The web server runs without workers; a separate `gatehouse worker` grades.
    let (mut served, state, invited) = prepare(0, 60, "Worker").await;
    served.start().await;
    let id = served.upload_sample(&invited.token).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(state.db.submission_by_id(&id).await.unwrap().unwrap().state.as_str(), "queued");

    let c = served.config();
    let mut worker = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        // The test binary's own GATEHOUSE_TEST_DATABASE is no setting of the app.
        .env_remove("GATEHOUSE_TEST_DATABASE")
        .env_remove("GATEHOUSE_TEST_PG_STATEMENTS")
        .args(["worker", "--count", "1"])
        .current_dir(&served.dir)
        .env("GATEHOUSE_DATABASE_URL", &c.database_url)
        .env("GATEHOUSE_DATA_DIR", &c.data_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let s = wait_final(&state, &id, Duration::from_secs(120)).await;
    worker.kill().unwrap();
    worker.wait().unwrap();
    assert_eq!(s.state.as_str(), "graded");
}
