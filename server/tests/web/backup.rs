//! Backups that restore (#29). SQLite: `gatehouse backup DEST` taken while
//! the server serves uploads and grades, `gatehouse restore` into a fresh
//! data folder, and the platform brought up there: every receipt verifies,
//! every scorecard renders, and what was waiting at the snapshot is graded.
//! Postgres: the documented `pg_dump --format=custom` / `pg_restore` into
//! an empty database, a server with an empty data folder on it (every blob
//! comes from the database).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::children::{Server, Settings};
use crate::ops::{
    Uploaded, answer_zip, graded_exactly_once, publish_soak_packet, reviewer_at, scorecard_renders,
    soak_assignments, upload_answer, wait_all_final,
};
use crate::restart::over;

fn gatehouse(args: &[&str], settings: &Settings) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(args)
        .env_remove("GATEHOUSE_TEST_DATABASE")
        .env_remove("GATEHOUSE_TEST_PG_STATEMENTS")
        .env("GATEHOUSE_CONFIG", "/nonexistent/gatehouse.toml")
        .env("GATEHOUSE_DATABASE_URL", &settings.database_url)
        .env("GATEHOUSE_DATA_DIR", &settings.data_dir)
        .output()
        .expect("gatehouse")
}

fn text(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Every submission of a restored platform: graded exactly once (what was
/// waiting at the snapshot graded after the restore), its receipt
/// verified, its zip there with its digest, its scorecard rendered.
async fn check_restored(state: &gatehouse::state::AppState, base: &str) -> usize {
    let ids: Vec<String> = crate::support::raw_text_int_rows(
        &state.config.database_url,
        "SELECT id, size_bytes FROM submissions",
    )
    .await
    .into_iter()
    .map(|(id, _)| id)
    .collect();
    let subs = wait_all_final(state, &ids, Duration::from_secs(240)).await;
    graded_exactly_once(state, &subs).await;
    let reviewer = reviewer_at(state, base).await;
    for s in subs.values() {
        let zip = state.blobs().local_copy(&s.blob_sha256).await.unwrap().expect("the zip");
        let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(std::fs::read(zip).unwrap()));
        assert_eq!(sha, s.blob_sha256);
        scorecard_renders(&reviewer, base, s).await;
    }
    subs.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_serving_restores_on_a_fresh_data_folder() {
    if crate::postgres::selected() {
        eprintln!("SQLite's backup; the Postgres pass tests pg_dump and pg_restore");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (settings, state) =
        over(&tmp.path().join("live"), 2, &[("GATEHOUSE_MAX_PENDING_JOBS", "50")]).await;
    publish_soak_packet(&state).await;
    let assignments = soak_assignments(&state, &settings.database_url, 3, 30).await;
    let mut server = Server::new(settings.clone(), 1, tmp.path().join("serve.log"));
    server.start().await;

    // Three clients upload while the backup is taken.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut clients = Vec::new();
    for (c, a) in assignments.iter().enumerate() {
        let (base, token, tx) = (server.base(), a.token.clone(), tx.clone());
        clients.push(tokio::spawn(async move {
            for i in 0..8 {
                match upload_answer(&base, &token, answer_zip(i % 3 != 0, &format!("{c}-{i}")))
                    .await
                {
                    Uploaded::Accepted(id) => tx.send(id).unwrap(),
                    Uploaded::Refused(s, m) => panic!("refused {s}: {m}"),
                    Uploaded::Unreachable(e) => panic!("{e}"),
                }
            }
        }));
    }
    drop(tx);
    let mut before = BTreeSet::new();
    while before.len() < 8 {
        before.insert(rx.recv().await.expect("uploads"));
    }
    let dest = tmp.path().join("backup");
    let out = gatehouse(&["backup", dest.to_str().unwrap()], &settings);
    assert!(out.status.success(), "backup: {}", text(&out));
    assert!(text(&out).contains("backed up to"), "{}", text(&out));
    for c in clients {
        c.await.unwrap();
    }
    while let Some(id) = rx.recv().await {
        before.insert(id);
    }
    assert_eq!(before.len(), 24);
    server.kill9();
    // A backup goes into an empty folder only.
    let again = gatehouse(&["backup", dest.to_str().unwrap()], &settings);
    assert!(!again.status.success() && text(&again).contains("is not empty"), "{}", text(&again));

    // A fresh machine: an empty data folder and no database.
    let fresh = tmp.path().join("fresh");
    let restored = Settings {
        database_url: format!("sqlite://{}", fresh.join("data/gatehouse.db").display()),
        data_dir: fresh.join("data"),
        ..settings.clone()
    };
    let out = gatehouse(&["restore", dest.to_str().unwrap()], &restored);
    assert!(out.status.success(), "restore: {}", text(&out));
    assert!(text(&out).contains("with their receipts verified"), "{}", text(&out));
    // Not over a restored (or any) database.
    let twice = gatehouse(&["restore", dest.to_str().unwrap()], &restored);
    assert!(!twice.status.success() && text(&twice).contains("exists"), "{}", text(&twice));

    let (_, state) = over_existing(&restored).await;
    let mut server = Server::new(restored, 1, tmp.path().join("restored.log"));
    server.start().await;
    let n = check_restored(&state, &server.base()).await;
    assert!(n >= 8, "the submissions accepted before the backup are there: {n}");
    let snapshot: Vec<String> = {
        let mut v = Vec::new();
        for a in &assignments {
            v.extend(
                state.db.submissions_of(&a.assignment.id).await.unwrap().into_iter().map(|s| s.id),
            );
        }
        v
    };
    assert!(snapshot.iter().all(|id| before.contains(id)), "nothing that was not accepted");
    eprintln!(
        "backup while serving: {n} of {} submissions in the snapshot, all graded and verified after the restore",
        before.len()
    );
}

/// An app state over an existing database and data folder.
async fn over_existing(s: &Settings) -> (Settings, gatehouse::state::AppState) {
    let state = gatehouse::serve::state(gatehouse::config::Config {
        database_url: s.database_url.clone(),
        data_dir: s.data_dir.clone(),
        packets_dir: std::path::PathBuf::new(),
        builtin_self_test: "off".into(),
        lease_secs: s.lease_secs,
        ..gatehouse::config::Config::default()
    })
    .await
    .unwrap();
    (s.clone(), state)
}

fn run_ok(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what}: {}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_dump_and_pg_restore_bring_back_every_blob_in_the_database() {
    if !crate::postgres::selected() {
        eprintln!("Postgres's pg_dump/pg_restore; the SQLite pass tests gatehouse backup");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (settings, state) =
        over(&tmp.path().join("live"), 2, &[("GATEHOUSE_MAX_PENDING_JOBS", "50")]).await;
    publish_soak_packet(&state).await;
    let assignments = soak_assignments(&state, &settings.database_url, 2, 20).await;
    let mut server = Server::new(settings.clone(), 1, tmp.path().join("serve.log"));
    server.start().await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let a = &assignments[i % 2];
        let Uploaded::Accepted(id) =
            upload_answer(&server.base(), &a.token, answer_zip(i != 3, &format!("p{i}"))).await
        else {
            panic!("refused")
        };
        ids.push(id);
    }
    wait_all_final(&state, &ids, Duration::from_secs(120)).await;
    // One more waiting for a worker when the dump is taken.
    server.kill9();
    let mut server = Server::new(settings.clone(), 0, tmp.path().join("serve2.log"));
    server.start().await;
    let Uploaded::Accepted(_) =
        upload_answer(&server.base(), &assignments[0].token, answer_zip(true, "late")).await
    else {
        panic!("refused")
    };

    // The documented commands, while the server runs.
    let dump = tmp.path().join("gatehouse.pgdump");
    run_ok(
        Command::new(crate::postgres::tool("pg_dump"))
            .args(["--format=custom", "--file"])
            .arg(&dump)
            .arg(&settings.database_url),
        "pg_dump",
    );
    server.kill9();
    let target = crate::postgres::fresh_database_url().await;
    run_ok(
        Command::new(crate::postgres::tool("pg_restore"))
            .args(["--no-owner", "--exit-on-error", "--dbname"])
            .arg(&target)
            .arg(&dump),
        "pg_restore",
    );
    // gatehouse backup says where to look instead.
    let out = gatehouse(&["backup", tmp.path().join("b").to_str().unwrap()], &settings);
    assert!(!out.status.success() && text(&out).contains("pg_dump"), "{}", text(&out));

    // A fresh machine: the restored database and an empty data folder.
    let restored = Settings {
        database_url: target,
        data_dir: tmp.path().join("fresh/data"),
        ..settings.clone()
    };
    let (_, state) = over_existing(&restored).await;
    assert!(!Path::new(&restored.data_dir).join("blobs").exists(), "nothing local yet");
    let mut server = Server::new(restored, 1, tmp.path().join("restored.log"));
    server.start().await;
    // The library's version folders unpacked from their archives at start
    // (the scorecard reads the version's manifest and starter there).
    let version = state.db.list_packets().await.unwrap();
    for p in version {
        for v in state.db.versions_of(p.id).await.unwrap() {
            let dir = gatehouse::library::version_dir(&state, &v.dir);
            assert!(dir.join("packet.toml").is_file(), "{} restored", dir.display());
        }
    }
    let n = check_restored(&state, &server.base()).await;
    assert_eq!(n, 7, "the six graded and the one waiting, graded after the restore");
}
