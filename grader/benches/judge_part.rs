//! What the judge apart costs (issue #44): each Python packet's sample
//! graded as it ships (judged apart: a host process beside the hidden
//! tests, every call a message) and as the same packet declaring
//! `judge = "shared"` (the hidden tests in the candidate's process with
//! the canary twins and the audit hook, the path every grading took before
//! the judge apart). Each kind is calibrated once before the clock starts;
//! gradings of the two kinds alternate, `GATEHOUSE_BENCH_ROUNDS` rounds (5).
//! Each row gives the medians of the CPU seconds (user + system of every
//! sandboxed process) and of the wall seconds. Included with `#[path]` by
//! the overhead benchmark (`GATEHOUSE_BENCH_ONLY=judge`);
//! `GATEHOUSE_BENCH_PACKETS` limits the packets.

use std::path::Path;
use std::time::Instant;

use grader::grade::{GradeOptions, Grader};
use grader::packet::Packet;

/// (slug, CPU apart, CPU shared, wall apart, wall shared), seconds.
pub type Row = (String, f64, f64, f64, f64);

fn children_cpu() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, u.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_CHILDREN): {}", std::io::Error::last_os_error());
    // SAFETY: getrusage returned 0, so the struct is initialised.
    let u = unsafe { u.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// A copy of `packet` in `dir` that declares `judge = "shared"`.
fn shared_copy(packet: &Packet, dir: &Path) -> Packet {
    let to = dir.join(&packet.manifest.packet.slug);
    grader::tree::copy_path(&packet.root, &to).expect("copying the packet");
    let manifest = std::fs::read_to_string(to.join("packet.toml")).expect("its manifest");
    let line = "[packet]\njudge = \"shared\"\njudge_reason = \"the bench's before column\"\n";
    let patched = match manifest.strip_prefix("[packet]\n") {
        Some(rest) => format!("{line}{rest}"),
        None => manifest.replacen("\n[packet]\n", &format!("\n{line}"), 1),
    };
    assert_ne!(patched, manifest, "a [packet] table");
    std::fs::write(to.join("packet.toml"), patched).expect("writing it");
    Packet::load(&to).expect("the shared copy loads")
}

/// The round's submission: the sample with `round` blank lines added to
/// the end of one of its source files, so that nothing a grading builds
/// from the candidate's code (a Go judge's server) serves the next round,
/// as it would not serve the next candidate; what the grader keeps for the
/// packet's own tests does.
fn round_zip(packet: &Packet, work: &Path, round: usize) -> std::path::PathBuf {
    let (tree, zip) = super::sample_zip(packet, &work.join(format!("round-{round}")));
    let sample = grader::tree::list_files(&packet.sample_dir()).expect("the sample's files");
    if let Some(f) = sample.keys().find(|f| !f.contains("test") && !f.ends_with(".md")) {
        let path = tree.join(f);
        let mut text = std::fs::read(&path).expect("a sample file");
        text.extend(std::iter::repeat_n(b'\n', round));
        std::fs::write(&path, text).expect("writing it");
        std::fs::remove_file(&zip).expect("the round's first zip");
        let times: std::collections::BTreeMap<String, i64> = (packet.manifest.sample.times.iter())
            .map(|(k, v)| (k.clone(), grader::manifest::TIME_BASE + v))
            .collect();
        grader::ingest::write_zip_from_dir(&tree, &zip, &times, grader::manifest::TIME_BASE)
            .expect("the round's zip");
    }
    zip
}

pub fn rows() -> Vec<Row> {
    let library = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets");
    let only = std::env::var("GATEHOUSE_BENCH_PACKETS").unwrap_or_default();
    let rounds: usize =
        std::env::var("GATEHOUSE_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let mut slugs: Vec<String> = std::fs::read_dir(&library)
        .expect("the packet library")
        .filter_map(|e| {
            let e = e.ok()?;
            e.path().join("packet.toml").is_file().then(|| e.file_name().into_string().ok())?
        })
        .filter(|s| only.is_empty() || only.split(',').any(|o| o.trim() == s))
        .collect();
    slugs.sort();
    let grader = Grader::for_host().expect("sandbox");
    let mut rows = Vec::new();
    for slug in slugs {
        let packet = Packet::load(&library.join(&slug)).expect("a built-in packet loads");
        eprintln!("  {slug}…");
        let work = tempfile::tempdir().expect("tempdir");
        let shared = shared_copy(&packet, work.path());
        let calibrations = [grader.calibration(&packet), grader.calibration(&shared)];
        let (mut cpu, mut wall) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
        let mut refused = None;
        'rounds: for round in 1..=rounds {
            let zip = round_zip(&packet, work.path(), round);
            for (i, p) in [&packet, &shared].into_iter().enumerate() {
                let opts = GradeOptions {
                    calibration: Some(calibrations[i].clone()),
                    ..GradeOptions::default()
                };
                let (t, c) = (Instant::now(), children_cpu());
                let card = match grader.grade_zip(p, &zip, &opts) {
                    Ok(card) => card,
                    Err(e) => {
                        refused = Some(format!("{} copy: {e}", ["apart", "shared"][i]));
                        break 'rounds;
                    }
                };
                wall[i].push(t.elapsed().as_secs_f64());
                cpu[i].push(children_cpu() - c);
                // GATEHOUSE_BENCH_RUNS=1: each run's CPU and wall (ms), to
                // see where a difference goes.
                if std::env::var_os("GATEHOUSE_BENCH_RUNS").is_some() {
                    let runs: Vec<String> = (card.receipt.timings.runs.iter())
                        .map(|t| format!("{} {:.0}/{:.0}", t.id, t.cpu_ms, t.wall_ms))
                        .collect();
                    eprintln!(
                        "    {} ({} {:?}/{}, {} findings): {}",
                        ["apart", "shared"][i],
                        card.scoring.decision,
                        card.scoring.score,
                        card.scoring.max_score,
                        card.findings.len(),
                        runs.join(", ")
                    );
                }
            }
        }
        // A packet whose tests need the judge apart (tax-rounding's oracle
        // calls the candidate's code through `host_module`) has no shared
        // column to compare with.
        if let Some(why) = refused {
            eprintln!("  {slug}: left out, its sample does not grade as the {why}");
            continue;
        }
        let [cpu_apart, cpu_shared] = cpu.map(median);
        let [wall_apart, wall_shared] = wall.map(median);
        rows.push((slug, cpu_apart, cpu_shared, wall_apart, wall_shared));
    }
    rows
}
