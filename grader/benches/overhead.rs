//! One run, three comparisons, printed side by side:
//!
//! 1. sandbox overhead per command against a plain spawn of the same command;
//! 2. ingestion of a 50 MB, 5,000-file zip against `unzip -q`;
//! 3. grading the refund-invoices sample against the sum of the raw times of
//!    the commands grading runs (the same commands, spawned plainly).
//!
//! Run with `cargo bench -p grader --bench overhead`. With
//! `GATEHOUSE_BENCH_ONLY=sandbox` (or `ingest`, `grading`) only that part
//! runs, for many alternating runs of two builds.
//!
//! `GATEHOUSE_BENCH_PACKET=SLUG` grades that packet's sample in the grading
//! part instead of refund-invoices.
//!
//! `GATEHOUSE_BENCH_ONLY=canaries` runs a fourth part instead, which takes
//! minutes: every packet's sample graded with and without its twins
//! (`canary_part.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use grader::grade::{GradeOptions, Grader};
use grader::manifest::{Detector, TIME_BASE};
use grader::packet::Packet;
use grader::tree::copy_path;

#[path = "canary_part.rs"]
mod canary_part;
#[path = "ingest_part.rs"]
mod ingest_part;
#[path = "judge_part.rs"]
mod judge_part;
#[path = "sandbox_part.rs"]
mod sandbox_part;

fn main() {
    let only = std::env::var("GATEHOUSE_BENCH_ONLY").unwrap_or_default();
    let wanted = |part: &str| only.is_empty() || only.split(',').any(|p| p.trim() == part);
    if only.split(',').any(|p| p.trim() == "judge") {
        eprintln!("grading each packet's sample judged apart and shared…");
        judge_table(&judge_part::rows());
        return;
    }
    if only.split(',').any(|p| p.trim() == "canaries") {
        eprintln!("grading each packet's sample with and without its twins…");
        canary_table(&canary_part::rows());
        return;
    }
    let mut rows: Vec<(String, f64, f64)> = Vec::new();
    if wanted("sandbox") {
        eprintln!("measuring sandbox overhead…");
        rows.extend(sandbox_part::rows());
    }
    if wanted("ingest") {
        eprintln!("measuring ingestion…");
        rows.extend(ingest_part::rows());
    }
    if wanted("grading") {
        eprintln!("measuring grading…");
        rows.extend(grading_rows());
    }

    println!();
    println!(
        "{:<58} {:>12} {:>12} {:>12}",
        "measurement (median)", "gatehouse", "baseline", "overhead"
    );
    for (label, ours, base) in &rows {
        let pct = if *base > 0.0 { (ours - base) / base * 100.0 } else { f64::NAN };
        println!("{label:<58} {ours:>9.1} ms {base:>9.1} ms {:>+8.1} ms ({pct:+.0}%)", ours - base);
    }
}

fn judge_table(rows: &[judge_part::Row]) {
    println!();
    println!(
        "{:<18} {:>10} {:>10} {:>8} {:>10} {:>10} {:>8}",
        "packet (median)",
        "CPU apart",
        "CPU shared",
        "CPU +",
        "wall apart",
        "wall shared",
        "wall +"
    );
    let pct = |a: f64, b: f64| if b > 0.0 { (a - b) / b * 100.0 } else { f64::NAN };
    let (mut ca, mut cs, mut wa, mut ws) = (0.0, 0.0, 0.0, 0.0);
    for (slug, cpu_a, cpu_s, wall_a, wall_s) in rows {
        println!(
            "{slug:<18} {cpu_a:>9.2}s {cpu_s:>9.2}s {:>+7.0}% {wall_a:>9.2}s {wall_s:>9.2}s {:>+7.0}%",
            pct(*cpu_a, *cpu_s),
            pct(*wall_a, *wall_s)
        );
        (ca, cs, wa, ws) = (ca + cpu_a, cs + cpu_s, wa + wall_a, ws + wall_s);
    }
    println!(
        "{:<18} {ca:>9.2}s {cs:>9.2}s {:>+7.0}% {wa:>9.2}s {ws:>9.2}s {:>+7.0}%",
        "all",
        pct(ca, cs),
        pct(wa, ws)
    );
}

fn canary_table(rows: &[canary_part::Row]) {
    println!();
    println!(
        "{:<18} {:>8} {:>11} {:>11} {:>8} {:>11} {:>11} {:>8}",
        "packet (mean)",
        "canaries",
        "CPU with",
        "CPU without",
        "CPU +",
        "wall with",
        "wall w/o",
        "wall +"
    );
    let pct = |a: f64, b: f64| if b > 0.0 { (a - b) / b * 100.0 } else { f64::NAN };
    let (mut tc, mut to) = (0.0, 0.0);
    for (slug, planted, cw, co, ww, wo) in rows {
        tc += cw;
        to += co;
        println!(
            "{slug:<18} {planted:>8.1} {cw:>9.2} s {co:>9.2} s {:>+7.0}% {ww:>9.2} s {wo:>9.2} s {:>+7.0}%",
            pct(*cw, *co),
            pct(*ww, *wo)
        );
    }
    println!("{:<18} {:>8} {tc:>9.2} s {to:>9.2} s {:>+7.0}%", "all", "", pct(tc, to));
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The submission a candidate would zip from `packet`'s sample: the
/// starter overlaid by the sample at `dir/tree`, zipped with the sample's
/// times to `dir/sample.zip`. Returns both paths.
fn sample_zip(packet: &Packet, dir: &Path) -> (PathBuf, PathBuf) {
    let tree = dir.join("tree");
    copy_path(&packet.starter_dir(), &tree).unwrap();
    copy_path(&packet.sample_dir(), &tree).unwrap();
    let zip = dir.join("sample.zip");
    let times: BTreeMap<String, i64> =
        packet.manifest.sample.times.iter().map(|(k, v)| (k.clone(), TIME_BASE + v)).collect();
    grader::ingest::write_zip_from_dir(&tree, &zip, &times, TIME_BASE).unwrap();
    (tree, zip)
}

/// Grades the refund-invoices sample (or `GATEHOUSE_BENCH_PACKET`'s) end to
/// end, and runs the same commands plainly in prepared copies of the
/// workspace.
fn grading_rows() -> Vec<(String, f64, f64)> {
    let slug = std::env::var("GATEHOUSE_BENCH_PACKET")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "refund-invoices".to_string());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets").join(&slug);
    let packet = Packet::load(&root).unwrap_or_else(|e| panic!("{slug} loads: {e}"));
    let m = &packet.manifest;
    let grader = Grader::for_host().expect("sandbox");
    let work = tempfile::tempdir().expect("tempdir");

    let (tree, zip) = sample_zip(&packet, work.path());

    // The commands grading runs, each with the files it needs.
    let mut commands: Vec<(String, PathBuf)> = Vec::new();
    let prepare =
        |name: &str, lay: &[grader::manifest::Lay], extra: Option<(&[u8], &str)>| -> PathBuf {
            let dir = work.path().join("raw").join(name);
            copy_path(&tree, &dir).unwrap();
            packet.lay_into(lay, &dir).unwrap();
            if let Some((bytes, to)) = extra {
                grader::tree::Root::open(&dir).unwrap().write(to, bytes).unwrap();
            }
            dir
        };
    for s in &m.steps {
        commands.push((s.run.clone(), prepare(&format!("step-{}", s.id), &s.lay, None)));
    }
    let mut n = 0;
    for f in &m.failures {
        f.detect.walk(&mut |d| {
            if let Detector::Script { run, lay, .. } = d
                && !commands.iter().any(|(c, _)| c == run)
            {
                n += 1;
                commands.push((run.clone(), prepare(&format!("script-{n}"), lay, None)));
            }
        });
    }
    if let Some(mu) = &m.mutation {
        for (id, mutant) in packet.mutants().unwrap() {
            commands.push((
                mu.run.clone(),
                prepare(&format!("mutant-{id}"), &[], Some((&mutant, &mu.target))),
            ));
        }
    }

    // The raw commands get the sandbox's environment: the interpreter's own
    // bin folder first (not a version manager's shim), HOME, locale.
    let mut path: Vec<String> = grader::sandbox::Sandbox::host_default_config()
        .path_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    path.push("/usr/local/bin:/usr/bin:/bin".into());
    let path = path.join(":");
    let raw_once = || -> f64 {
        let mut total = 0.0;
        for (cmd, dir) in &commands {
            let t = Instant::now();
            let _ = Command::new("/bin/sh")
                .arg("-c")
                .arg(cmd)
                .current_dir(dir)
                .env_clear()
                .env("PATH", &path)
                .env("HOME", "/tmp")
                .env("LANG", "C.UTF-8")
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .output()
                .unwrap();
            total += t.elapsed().as_secs_f64() * 1e3;
        }
        total
    };
    let grade_once = || -> f64 {
        let t = Instant::now();
        let card = grader.grade_zip(&packet, &zip, &GradeOptions::default()).expect("grades");
        assert!(card.findings.is_empty(), "the sample must grade clean");
        t.elapsed().as_secs_f64() * 1e3
    };
    // Warm up: the first grade also probes the environment once.
    grade_once();
    raw_once();
    let (mut graded, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        graded.push(grade_once());
        raw.push(raw_once());
    }
    vec![(
        format!("grade {slug} sample ({} commands) vs raw sum", commands.len()),
        median(graded),
        median(raw),
    )]
}
