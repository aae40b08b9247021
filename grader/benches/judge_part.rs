//! The judge apart's cost (JUDGE.md, issues #44 and #45): each packet's
//! sample graded as it ships (its packet tests judged apart) and graded
//! from a copy of the packet that declares `judge = "shared"` (the tests
//! beside the candidate's code, with the canaries and the runners'
//! cross-checks, as before the judge apart), alternating, for
//! `GATEHOUSE_BENCH_ROUNDS` rounds (5). Each round grades another
//! submission, as a grader serving candidates would: the sample with as
//! many blank lines as the round's number added to the end of one of its
//! files (so nothing built for one submission serves the next; what the
//! grader keeps for the packet's tests does, as it would). Each row gives
//! the medians of the wall seconds and of the CPU seconds (user + system
//! of every sandboxed process) of a whole grading. Included with `#[path]` by the overhead
//! benchmark; `GATEHOUSE_BENCH_PACKETS` names the packets (all by
//! default); `GATEHOUSE_BENCH_RUNS=1` prints each grading's runs' CPU.

use std::path::Path;
use std::time::Instant;

use grader::grade::{GradeOptions, Grader};
use grader::packet::Packet;

/// One row per packet: (slug, wall apart, wall shared, CPU apart, CPU
/// shared), medians in seconds.
pub type Row = (String, f64, f64, f64, f64);

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
        let apart = Packet::load(&library.join(&slug)).expect("a built-in packet loads");
        let copy = tempfile::tempdir().expect("tempdir");
        let dir = copy.path().join(&slug);
        grader::tree::copy_path(&library.join(&slug), &dir).unwrap();
        let manifest = std::fs::read_to_string(dir.join("packet.toml")).unwrap();
        let marked = manifest.replacen(
            "[packet]\n",
            "[packet]\njudge = \"shared\"\njudge_reason = \"the bench's control\"\n",
            1,
        );
        assert_ne!(marked, manifest, "{slug}: no [packet] table");
        std::fs::write(dir.join("packet.toml"), marked).unwrap();
        let shared = Packet::load(&dir).expect("the shared copy loads");
        let work = tempfile::tempdir().expect("tempdir");
        // The round's submission: the sample, one of its files longer.
        let zip_of = |round: usize| {
            let dir = work.path().join(format!("round-{round}"));
            let (tree, zip) = super::sample_zip(&apart, &dir);
            let sample = grader::tree::list_files(&apart.sample_dir()).unwrap();
            if let Some(f) = sample.keys().find(|f| !f.contains("test")) {
                let path = tree.join(f);
                let mut text = std::fs::read(&path).unwrap();
                text.extend(std::iter::repeat_n(b'\n', round));
                std::fs::write(&path, text).unwrap();
                std::fs::remove_file(&zip).unwrap();
                let times: std::collections::BTreeMap<String, i64> =
                    (apart.manifest.sample.times.iter())
                        .map(|(k, v)| (k.clone(), grader::manifest::TIME_BASE + v))
                        .collect();
                grader::ingest::write_zip_from_dir(
                    &tree,
                    &zip,
                    &times,
                    grader::manifest::TIME_BASE,
                )
                .unwrap();
            }
            zip
        };
        let grade = |p: &Packet, zip: &Path| {
            let (t, c) = (Instant::now(), super::canary_part::children_cpu());
            let card =
                grader.grade_zip(p, zip, &GradeOptions::default()).expect("the sample grades");
            if std::env::var_os("GATEHOUSE_BENCH_RUNS").is_some() {
                let runs: Vec<String> = (card.receipt.timings.runs.iter())
                    .map(|t| format!("{} {:.0}", t.id, t.cpu_ms))
                    .collect();
                eprintln!("    {:?}: {}", card.receipt.judged.values().next(), runs.join(", "));
            }
            (t.elapsed().as_secs_f64(), super::canary_part::children_cpu() - c, card.findings.len())
        };
        // Warm up both: calibrations, the environment probe.
        let zip = zip_of(0);
        let (_, _, found_apart) = grade(&apart, &zip);
        let (_, _, found_shared) = grade(&shared, &zip);
        assert_eq!(found_apart, found_shared, "{slug}: judging apart changed the findings");
        let (mut wa, mut ws, mut ca, mut cs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 1..=rounds {
            let zip = zip_of(round);
            let (w, c, _) = grade(&apart, &zip);
            wa.push(w);
            ca.push(c);
            let (w, c, _) = grade(&shared, &zip);
            ws.push(w);
            cs.push(c);
        }
        rows.push((
            slug,
            super::median(wa),
            super::median(ws),
            super::median(ca),
            super::median(cs),
        ));
    }
    rows
}
