//! What killed processes leave and caches nobody uses (#29), swept by
//! `gatehouse::sweep`: unfinished writes in `<data>/tmp/` (live ones kept,
//! of this process or another), and with Postgres the workers' blob cache,
//! unpacked packet versions, unused packet archives and the chunks of an
//! upload whose process died; with SQLite the data folder is the store and
//! nothing of it is evicted.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use gatehouse::sweep::{Role, run};
use sha2::Digest;

use crate::candidate::{files_under, publish_packet};
use crate::support::{Arg, TestApp, raw_exec, raw_text_int_rows};

fn age(path: &Path, by: Duration) {
    let f = std::fs::File::open(path).unwrap();
    f.set_modified(SystemTime::now() - by).unwrap();
}

const OLD: Duration = Duration::from_secs(30 * 24 * 3600);

/// A child process (a shell) holding an exclusive `flock` on `path` until
/// killed: another process's live write.
fn held_by_another_process(path: &Path) -> std::process::Child {
    // `--close`: the lock is flock(1)'s alone, not its command's. It waits
    // for the lock (with `--nonblock` it gave up when it met one of the
    // probes below, which then never found the lock held).
    let mut child = std::process::Command::new("flock")
        .args(["--exclusive", "--close"])
        .arg(path)
        .args(["sleep", "60"])
        .process_group(0)
        .spawn()
        .expect("flock(1)");
    // Wait until it holds the lock (up to 10 s, on a busy machine).
    for _ in 0..1000 {
        let probe = std::process::Command::new("flock")
            .args(["--exclusive", "--nonblock"])
            .arg(path)
            .arg("true")
            .status()
            .unwrap();
        if !probe.success() {
            return child;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("flock(1) never took {}", path.display());
}

#[tokio::test]
async fn unfinished_writes_of_dead_processes_are_swept_and_live_ones_are_kept() {
    let app = TestApp::spawn().await;
    let data = app.state.config.data_dir.clone();
    let tmp = gatehouse::blobs::tmp_dir(&data);
    std::fs::create_dir_all(&tmp).unwrap();
    // What a killed upload leaves: a temporary file nobody holds.
    let dead = tmp.join("upload-killed.part");
    std::fs::write(&dead, b"half an upload").unwrap();
    // Another process's upload in progress (holds its lock).
    let other = tmp.join("upload-other.part");
    std::fs::write(&other, b"streaming").unwrap();
    let mut holder = held_by_another_process(&other);
    // This process's own write in progress, and a scratch folder.
    let mut live = app.state.blobs().writer(1 << 20).await.unwrap();
    live.write(b"still coming").await.unwrap();
    let scratch = grader::workdir::WorkDir::new_in(&tmp, "gatehouse-validate-").unwrap();
    // A killed validation's scratch folder: its lock is free.
    let killed_scratch = tmp.join("gatehouse-validate-killed");
    std::fs::create_dir(&killed_scratch).unwrap();
    std::fs::write(killed_scratch.join("f.py"), b"x").unwrap();
    std::fs::write(tmp.join("gatehouse-validate-killed.lock"), b"").unwrap();
    // A folder of an older version (no lock), old: removed; fresh: kept.
    let (stale, fresh) = (tmp.join("packet-old"), tmp.join("packet-new"));
    for d in [&stale, &fresh] {
        std::fs::create_dir(d).unwrap();
    }
    age(&stale, OLD);

    let before = files_under(&tmp).len();
    let swept = run(&app.state, Role::Server).await;
    assert!(swept.tmp >= 3, "{swept:?}");
    assert!(!dead.exists(), "the killed upload's file is gone");
    assert!(!killed_scratch.exists() && !tmp.join("gatehouse-validate-killed.lock").exists());
    assert!(!stale.exists() && fresh.exists());
    assert!(other.exists(), "another process's live upload is kept");
    assert!(scratch.path().exists(), "a live scratch folder is kept");
    assert!(files_under(&tmp).len() < before);
    // This process's write goes on and commits.
    let committed = live.finish().await.unwrap().commit().await.unwrap();
    assert_eq!(std::fs::read(committed).unwrap(), b"still coming");

    // Once the other process dies its file goes at the next sweep.
    // SAFETY: kills the process group the child leads (flock and its sleep).
    unsafe { libc::kill(-(holder.id() as i32), libc::SIGKILL) };
    holder.wait().unwrap();
    run(&app.state, Role::Server).await;
    assert!(!other.exists(), "a dead process's file is swept");
    drop(scratch);
    run(&app.state, Role::Server).await;
    assert_eq!(files_under(&tmp), Vec::<PathBuf>::new(), "nothing left in tmp");
}

/// Pseudo-random bytes (full chunks).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test]
async fn caches_unused_archives_and_chunks_of_dead_uploads_are_swept_with_postgres() {
    let app = TestApp::spawn().await;
    let version = publish_packet(&app.state).await;
    let blobs = app.state.blobs();
    let url = app.state.config.database_url.clone();
    let file = app.dir.path().join("blob.bin");
    std::fs::write(&file, noise(3 << 19, 3)).unwrap();
    let sha = blobs.put_file(&file).await.unwrap();
    let local = gatehouse::blobs::blob_path(&app.state.config.data_dir, &sha);
    age(&local, OLD);
    if !crate::postgres::selected() {
        // SQLite: the data folder is the store; an old blob is never evicted.
        let swept = run(&app.state, Role::Server).await;
        assert_eq!((swept.cached_blobs, swept.archives, swept.chunks), (0, 0, 0), "{swept:?}");
        assert!(local.exists(), "SQLite's blob store is never evicted");
        return;
    }
    // A fresh cached blob, kept.
    std::fs::write(&file, noise(1000, 4)).unwrap();
    let fresh = blobs.put_file(&file).await.unwrap();
    // A worker's unpacked version, old, and one in use.
    let cache = app.state.config.data_dir.join("cache/packets");
    let (old_pkt, used_pkt) = (cache.join("d-old"), cache.join("d-used"));
    for d in [&old_pkt, &used_pkt] {
        std::fs::create_dir_all(d.join("slug")).unwrap();
    }
    age(&old_pkt, OLD);
    // Chunks of an upload whose process died (no blobs row, written long
    // ago) and of one still streaming in.
    for (s, at) in [("dead", 1_000i64), ("live", gatehouse::now_ms())] {
        let sha = format!("{s:0>64}");
        raw_exec(
            &url,
            "INSERT INTO blob_chunks (sha256, seq, bytes, written_at) VALUES (?, 0, decode('6279', 'hex'), ?)",
            &[Arg::T(&sha), Arg::I(at)],
        )
        .await;
    }
    // An archive of a digest no version has (a draft's earlier edit),
    // unused for long; one of such a digest just stored; the version's own.
    let old_zip = app.dir.path().join("old.zip");
    std::fs::write(&old_zip, noise(5000, 5)).unwrap();
    let old_archive = blobs.put_file(&old_zip).await.unwrap();
    app.state.db.set_packet_archive("unused-digest", &old_archive).await.unwrap();
    raw_exec(&url, "UPDATE packet_archives SET used_at = 5 WHERE digest = 'unused-digest'", &[])
        .await;
    app.state.db.set_packet_archive("just-stored", &old_archive).await.unwrap();
    let version_archive = app.state.db.packet_archive(&version.digest).await.unwrap().unwrap();
    raw_exec(
        &url,
        "UPDATE packet_archives SET used_at = 5 WHERE digest = ?",
        &[Arg::T(&version.digest)],
    )
    .await;

    let swept = run(&app.state, Role::Server).await;
    assert_eq!(swept.cached_blobs, 1, "{swept:?}");
    assert_eq!(swept.cached_packets, 1, "{swept:?}");
    assert_eq!(swept.chunks, 1, "{swept:?}");
    assert_eq!(swept.archives, 1, "{swept:?}");
    assert_eq!(swept.archive_blobs, 0, "the blob is still another archive's: {swept:?}");
    assert!(!local.exists(), "the unused cached blob is evicted");
    assert!(gatehouse::blobs::blob_path(&app.state.config.data_dir, &fresh).exists());
    assert!(!old_pkt.exists() && used_pkt.exists());
    let chunks = raw_text_int_rows(
        &url,
        "SELECT sha256, seq FROM blob_chunks WHERE sha256 LIKE '%dead' OR sha256 LIKE '%live'",
    )
    .await;
    assert_eq!(chunks, vec![(format!("{:0>64}", "live"), 0)], "the dead upload's chunks are gone");
    assert_eq!(app.state.db.packet_archive("unused-digest").await.unwrap(), None);
    assert_eq!(app.state.db.packet_archive(&version.digest).await.unwrap(), Some(version_archive));
    // An evicted blob is read back from the database, digest checked.
    let back = blobs.local_copy(&sha).await.unwrap().expect("fetched again");
    assert_eq!(hex::encode(sha2::Sha256::digest(std::fs::read(back).unwrap())), sha);
    // Its last archive gone, the blob goes with it.
    raw_exec(&url, "UPDATE packet_archives SET used_at = 5 WHERE digest = 'just-stored'", &[])
        .await;
    let swept = run(&app.state, Role::Server).await;
    assert_eq!((swept.archives, swept.archive_blobs), (1, 1), "{swept:?}");
    assert_eq!(app.state.db.blob_meta(&old_archive).await.unwrap(), None);
    let left = raw_text_int_rows(
        &url,
        &format!("SELECT sha256, seq FROM blob_chunks WHERE sha256 = '{old_archive}'"),
    )
    .await;
    assert!(left.is_empty(), "its chunks too: {left:?}");
    // A worker sweeps its own folders, never the database.
    raw_exec(
        &url,
        "INSERT INTO blob_chunks (sha256, seq, bytes, written_at) VALUES (?, 0, decode('6279', 'hex'), 1)",
        &[Arg::T(&format!("{:0>64}", "dead2"))],
    )
    .await;
    let swept = run(&app.state, Role::Worker).await;
    assert_eq!(swept.chunks, 0, "{swept:?}");
    let chunks =
        raw_text_int_rows(&url, "SELECT sha256, seq FROM blob_chunks WHERE sha256 LIKE '%dead2'")
            .await;
    assert_eq!(chunks.len(), 1);
}
