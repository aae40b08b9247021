//! The canaries' cost (issue #25): each packet's sample graded with the
//! calibration as recorded (twins planted, one calibrated twin per chosen
//! test) and with the same calibration stripped of its canary templates (no
//! twin is planted; the generic pair of the candidate-written runs and the
//! runner's audit hook stay, so they are in both columns). Gradings of the
//! two kinds alternate. Each round grades under another salt, as another
//! submission would be: which twins a run plants is drawn from it, and a
//! costly first twin is planted only with some odds. Each row gives the
//! means over the rounds (what a grading costs on average over the draws)
//! of the CPU seconds (user + system of every sandboxed process, which the
//! sandbox waits for) and of the wall seconds, and of the canaries planted.
//! Included with `#[path]` by the overhead benchmark; it has no `main` of
//! its own. `GATEHOUSE_BENCH_PACKETS` (slugs, comma-separated) limits the
//! packets; `GATEHOUSE_BENCH_ROUNDS` sets the rounds (5);
//! `GATEHOUSE_BENCH_RUNS=1` prints each grading's runs' CPU.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use grader::grade::{GradeOptions, Grader};
use grader::packet::Packet;

/// User plus system CPU seconds of this process's waited-for children.
pub fn children_cpu() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, u.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_CHILDREN): {}", std::io::Error::last_os_error());
    // SAFETY: getrusage returned 0, so the struct is initialised.
    let u = unsafe { u.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// One row per packet: (slug, canary tests the receipt counts with twins
/// (twins and generic pairs), CPU with, CPU without, wall with, wall
/// without), seconds.
pub type Row = (String, f64, f64, f64, f64, f64);

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
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
        eprintln!("  {slug}…");
        let packet = Packet::load(&library.join(&slug)).expect("a built-in packet loads");
        let work = tempfile::tempdir().expect("tempdir");
        let (_, zip) = super::sample_zip(&packet, work.path());

        let recorded = grader.calibration(&packet);
        let salted = |round: usize, canaries: bool| {
            let mut c = (*recorded).clone();
            c.salt = format!("{}/{round}", c.salt);
            if !canaries {
                c.canaries.clear();
            }
            Arc::new(c)
        };
        let grade = |calibration: &Arc<grader::grade::Calibration>| {
            let opts =
                GradeOptions { calibration: Some(calibration.clone()), ..GradeOptions::default() };
            let (t, c) = (Instant::now(), children_cpu());
            let card = grader.grade_zip(&packet, &zip, &opts).expect("the sample grades");
            let planted: usize = card.receipt.canaries.values().sum();
            // GATEHOUSE_BENCH_RUNS=1: each run's CPU, to see where a
            // difference goes.
            if std::env::var_os("GATEHOUSE_BENCH_RUNS").is_some() {
                let runs: Vec<String> = (card.receipt.timings.runs.iter())
                    .map(|t| format!("{} {:.0}", t.id, t.cpu_ms))
                    .collect();
                eprintln!("    {} canaries: {}", planted, runs.join(", "));
            }
            (children_cpu() - c, t.elapsed().as_secs_f64(), card.findings.len(), planted)
        };
        let (mut cw, mut co, mut ww, mut wo) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut planted = Vec::new();
        for round in 0..rounds {
            let (c, w, found_with, n) = grade(&salted(round, true));
            let (c2, w2, found_without, _) = grade(&salted(round, false));
            assert_eq!(found_with, found_without, "{slug}: the twins changed the findings");
            planted.push(n as f64);
            cw.push(c);
            ww.push(w);
            co.push(c2);
            wo.push(w2);
        }
        rows.push((slug, mean(&planted), mean(&cw), mean(&co), mean(&ww), mean(&wo)));
    }
    rows
}
