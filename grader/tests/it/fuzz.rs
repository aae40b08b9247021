//! Property tests (issue #9, part 5): every parser that reads candidate
//! bytes in the grader's own process takes arbitrary and mutated input
//! without panicking, within bounded memory, and ingestion writes nothing
//! outside its destination. proptest reports any panic as a failure, with the
//! input shrunk.
//!
//! Case counts are chosen so the whole module runs in well under a minute on
//! a shared two-core machine; `GATEHOUSE_FUZZ_CASES` multiplies them for a
//! longer run (`GATEHOUSE_FUZZ_CASES=20 cargo test -p grader --test it fuzz::`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use grader::clock::parse_time;
use grader::detect::parse_ledger;
use grader::diff::parse_unified_diff;
use grader::diff::{apply_diff, split_diff};
use grader::ingest::{IngestLimits, IngestOptions, ingest_with};
use grader::manifest::{FieldType, LogExpect, Manifest};
use grader::pytest::{failed_nodes, pytest_log_problems};
use grader::run::{normalize_output, parse_script_output, read_junit};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::ingest::{Raw, crc32, deflated_zeros, raw, raw_zip};

/// Cases for one property: `base`, times `GATEHOUSE_FUZZ_CASES` when set.
fn cases(base: u32) -> u32 {
    let factor = std::env::var("GATEHOUSE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    base.saturating_mul(factor)
}

/// Runs `test` on `cases` inputs from `strategy`; no regression files are
/// written into the source tree.
fn fuzz<S: Strategy>(
    name: &str,
    base: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases: cases(base),
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let started = std::time::Instant::now();
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{name}: {e}");
    }
    eprintln!("fuzz {name}: {} cases in {:.1?}", cases(base), started.elapsed());
}

/// The process's peak resident memory (VmHWM), in MiB.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// A bound far below what a parser sizing buffers by declared sizes (4 GiB
/// entries, 65,535-entry directories) would reach, and far above what the
/// whole test binary needs.
const PEAK_RSS_LIMIT_MIB: u64 = 512;

fn assert_memory_bounded(name: &str) {
    let peak = peak_rss_mib();
    eprintln!("fuzz {name}: peak resident memory of the test process so far {peak} MiB");
    assert!(peak < PEAK_RSS_LIMIT_MIB, "{name}: peak resident memory {peak} MiB");
}

// --- Zip ingestion ----------------------------------------------------------------

/// Small limits, so that a case that extracts is cheap, and so that the
/// limits themselves are exercised.
fn small_limits() -> IngestLimits {
    IngestLimits {
        max_entries: 64,
        max_entry_bytes: 1 << 20,
        max_total_bytes: 4 << 20,
        max_ratio: 200,
        max_nesting: 1,
        max_path_bytes: 256,
        max_path_depth: 8,
    }
}

/// Every path under `root` with its kind and contents (or link target), to
/// compare before and after.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(root).min_depth(1).follow_links(false) {
        let entry = entry.expect("walking the snapshot");
        let rel = entry.path().strip_prefix(root).expect("inside").to_string_lossy().into_owned();
        let kind = entry.file_type();
        let what = if kind.is_symlink() {
            format!("link {}", std::fs::read_link(entry.path()).expect("link").display())
        } else if kind.is_dir() {
            "dir".to_owned()
        } else {
            format!(
                "file {}",
                grader::tree::sha256_hex(&std::fs::read(entry.path()).expect("reading"))
            )
        };
        out.insert(rel, what);
    }
    out
}

/// Ingests `bytes` and checks what ingestion promises whatever the bytes:
/// no panic; a refusal leaves nothing; a success writes only regular files
/// and folders, all inside the destination, exactly the files it lists,
/// within the limits; nothing beside the destination changes.
fn ingest_holds_its_promises(bytes: &[u8]) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let zip = tmp.path().join("in.zip");
    std::fs::write(&zip, bytes).expect("writing the zip");
    // Bait beside the destination: a folder, a file and a link out.
    std::fs::create_dir(tmp.path().join("beside")).expect("mkdir");
    std::fs::write(tmp.path().join("beside/keep.txt"), b"keep").expect("write");
    std::os::unix::fs::symlink("/etc", tmp.path().join("beside/etc")).expect("symlink");
    let before = snapshot(tmp.path());
    let dest = tmp.path().join("out");
    let limits = small_limits();
    let options = IngestOptions { workspace_names: BTreeSet::from(["keep".to_owned()]) };
    let result = ingest_with(&zip, &dest, &limits, &options);

    let mut after = snapshot(tmp.path());
    let inside: BTreeMap<String, String> = after
        .iter()
        .filter(|(p, _)| p.starts_with("out/"))
        .map(|(p, k)| (p.clone(), k.clone()))
        .collect();
    after.retain(|p, _| p != "out" && !p.starts_with("out/"));
    prop_assert_eq!(&after, &before, "something beside the destination changed");
    match result {
        Err(e) => {
            prop_assert!(!dest.exists(), "a refusal ({}) left the destination behind", e);
            prop_assert!(!e.to_string().is_empty());
        }
        Ok(got) => {
            prop_assert!(
                inside.values().all(|k| k == "dir" || k.starts_with("file ")),
                "not a file or folder: {:?}",
                inside
            );
            let on_disk: BTreeMap<String, String> = inside
                .iter()
                .filter(|(_, k)| k.starts_with("file "))
                .map(|(p, k)| (p["out/".len()..].to_owned(), k["file ".len()..].to_owned()))
                .collect();
            let listed: BTreeMap<String, String> =
                got.files.iter().map(|f| (f.path.clone(), f.sha256.clone())).collect();
            prop_assert_eq!(on_disk, listed, "the listing and the files on disk differ");
            prop_assert!(got.total_bytes <= limits.max_total_bytes);
            prop_assert!(got.files.len() <= limits.max_entries);
            for f in &got.files {
                prop_assert!(grader::tree::is_safe_relative(&f.path), "unsafe path {:?}", f.path);
                prop_assert!(!f.path.contains('\\'), "a backslash survived in {:?}", f.path);
                prop_assert!(f.size <= limits.max_entry_bytes);
            }
        }
    }
    Ok(())
}

/// Entry names from the pieces that matter to ingestion's rules.
fn entry_name() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just("a".to_owned()),
        Just("B".to_owned()),
        Just("b.py".to_owned()),
        Just("mywork".to_owned()),
        Just("keep".to_owned()),
        Just("__MACOSX".to_owned()),
        Just("._x".to_owned()),
        Just(".DS_Store".to_owned()),
        Just("Thumbs.db".to_owned()),
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just("".to_owned()),
        Just("C:".to_owned()),
        Just("caf\u{e9}".to_owned()),
        Just("cafe\u{301}".to_owned()),
        Just("\u{3a3}".to_owned()),
        "[ -~]{0,6}",
        "\\PC{0,3}",
    ];
    let sep = prop_oneof![4 => Just("/"), 2 => Just("\\"), 1 => Just("//")];
    (
        prop::collection::vec((piece, sep), 1..5),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..3),
    )
        .prop_map(|(parts, dir, junk)| {
            let mut name = String::new();
            for (i, (p, s)) in parts.iter().enumerate() {
                if i > 0 {
                    name.push_str(s);
                }
                name.push_str(p);
            }
            if dir {
                name.push('/');
            }
            let mut bytes = name.into_bytes();
            // Now and then an invalid or control byte.
            if junk.len() == 2 {
                bytes.push(junk[0]);
            }
            bytes
        })
}

/// One raw entry: a name, contents, and the header fields that change how
/// it is read (flags, method, unix mode, host).
fn raw_entry() -> impl Strategy<Value = Raw> {
    (
        entry_name(),
        prop::collection::vec(any::<u8>(), 0..64),
        prop_oneof![6 => Just(0u16), 1 => Just(1u16 << 11), 1 => Just(1u16), 1 => any::<u16>()],
        prop_oneof![6 => Just(0o100644u32 << 16), 1 => Just(0o40755u32 << 16), 1 => Just(0o120777u32 << 16), 1 => any::<u32>()],
        prop_oneof![Just(0x031Eu16), Just(0x0014u16), any::<u16>()],
        prop_oneof![8 => Just(None), 1 => (0usize..4).prop_map(Some)],
        prop_oneof![8 => Just(0u16), 1 => Just(8u16), 1 => any::<u16>()],
    )
        .prop_map(|(name, data, flags, external, made_by, reuse, method)| {
            let mut e = raw(&name, &data);
            e.flags = flags;
            e.external = external;
            e.made_by = made_by;
            e.method = method;
            if method == 8 {
                // A deflate stream of zeros, declared with its real size.
                e.data = deflated_zeros(data.len());
                e.usize_ = (258 * data.len() + 1) as u32;
                e.crc = crc32(&vec![0u8; e.usize_ as usize]);
            }
            e.reuse_header_of = reuse;
            e
        })
}

/// A well-formed archive of raw entries (entries pointing at a later
/// header are pointed at the first instead).
fn raw_archive() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(raw_entry(), 1..8).prop_map(|mut entries| {
        for i in 0..entries.len() {
            if let Some(j) = entries[i].reuse_header_of {
                entries[i].reuse_header_of =
                    if j < i && entries[j].reuse_header_of.is_none() { Some(j) } else { None };
            }
        }
        raw_zip(&entries, None)
    })
}

/// Byte edits to a valid archive: single bytes, and 16/32-bit fields set to
/// the values that break readers (0, all ones, sizes just past the file).
fn mutated(bytes: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = bytes.len().max(1);
    let edit = prop_oneof![
        (0..len, any::<u8>()).prop_map(|(at, b)| (at, vec![b])),
        (
            0..len,
            prop_oneof![Just(0u32), Just(u32::MAX), Just(0xFFFF), Just(0x7FFF_FFFF), any::<u32>()]
        )
            .prop_map(|(at, v)| (at, v.to_le_bytes().to_vec())),
        (0..len, prop_oneof![Just(0u16), Just(u16::MAX), any::<u16>()])
            .prop_map(|(at, v)| (at, v.to_le_bytes().to_vec())),
    ];
    (prop::collection::vec(edit, 1..6), 0..=len).prop_map(move |(edits, cut)| {
        let mut out = bytes.clone();
        for (at, value) in edits {
            for (i, b) in value.into_iter().enumerate() {
                if let Some(slot) = out.get_mut(at + i) {
                    *slot = b;
                }
            }
        }
        // Sometimes truncated.
        if cut % 7 == 0 {
            out.truncate(cut);
        }
        out
    })
}

/// The snapshot the ingestion property compares can tell: a file written,
/// changed or linked beside the destination shows.
#[test]
fn fuzz_snapshot_sees_changes_beside_the_destination() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("a"), b"1").expect("write");
    let before = snapshot(tmp.path());
    assert_eq!(before, snapshot(tmp.path()));
    std::fs::write(tmp.path().join("a"), b"2").expect("write");
    let changed = snapshot(tmp.path());
    assert_ne!(before, changed);
    std::os::unix::fs::symlink("/etc", tmp.path().join("l")).expect("symlink");
    assert_eq!(snapshot(tmp.path()).get("l").map(String::as_str), Some("link /etc"));
}

#[test]
fn fuzz_ingest_arbitrary_bytes() {
    let bytes = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2048),
        // Arbitrary bytes dressed with zip signatures, so the readers get
        // past their first check.
        (prop::collection::vec(any::<u8>(), 0..1024), prop::collection::vec(any::<u8>(), 0..18))
            .prop_map(|(body, tail)| {
                let mut out = b"PK\x03\x04".to_vec();
                out.extend(body);
                out.extend_from_slice(b"PK\x05\x06");
                out.extend(tail);
                out
            }),
    ];
    fuzz("ingest arbitrary bytes", 300, bytes, |b| ingest_holds_its_promises(&b));
    assert_memory_bounded("ingest arbitrary bytes");
}

#[test]
fn fuzz_ingest_generated_archives() {
    fuzz("ingest generated archives", 400, raw_archive(), |b| ingest_holds_its_promises(&b));
    assert_memory_bounded("ingest generated archives");
}

#[test]
fn fuzz_ingest_mutated_archives() {
    fuzz("ingest mutated archives", 500, raw_archive().prop_flat_map(mutated), |b| {
        ingest_holds_its_promises(&b)
    });
    assert_memory_bounded("ingest mutated archives");
}

#[test]
fn fuzz_ingest_mutated_zip_writer_archives() {
    // Archives as the zip crate writes them (deflate, extended timestamps,
    // nested zips), mutated.
    let archive = prop::collection::vec(
        ("[a-z]{1,3}(/[a-z]{1,3}){0,2}", prop::collection::vec(any::<u8>(), 0..200), any::<bool>()),
        1..5,
    )
    .prop_map(|files| {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let mut seen = BTreeSet::new();
        for (name, data, nested) in files {
            if !seen.insert(name.clone()) {
                continue;
            }
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .with_extended_timestamp(Some(1_700_000_000), None, None)
                .expect("timestamp");
            w.start_file(name.as_str(), opts).expect("entry");
            if nested {
                let mut inner = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
                inner
                    .start_file("inner.txt", zip::write::SimpleFileOptions::default())
                    .expect("inner");
                inner.write_all(&data).expect("inner write");
                w.write_all(&inner.finish().expect("inner finish").into_inner()).expect("write");
            } else {
                w.write_all(&data).expect("write");
            }
        }
        w.finish().expect("finish").into_inner()
    });
    fuzz("ingest mutated zip-writer archives", 400, archive.prop_flat_map(mutated), |b| {
        ingest_holds_its_promises(&b)
    });
    assert_memory_bounded("ingest mutated zip-writer archives");
}

// --- JUnit XML -------------------------------------------------------------------

fn xml_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("<?xml version=\"1.0\" encoding=\"utf-8\"?>".to_owned()),
        Just("<testsuites>".to_owned()),
        Just("</testsuites>".to_owned()),
        Just("<testsuite name=\"pytest\" tests=\"99999999999999999999\" failures=\"-1\" time=\"NaN\">".to_owned()),
        Just("</testsuite>".to_owned()),
        Just("<testcase classname=\"test_x\" name=\"test_a\" time=\"0.1\">".to_owned()),
        Just("<testcase name=\"t\"/>".to_owned()),
        Just("</testcase>".to_owned()),
        Just("<failure message=\"boom\">trace</failure>".to_owned()),
        Just("<failure/>".to_owned()),
        Just("<error message=\"".to_owned()),
        Just("<skipped/>".to_owned()),
        Just("<system-out><![CDATA[".to_owned()),
        Just("]]></system-out>".to_owned()),
        Just("&amp;&#x0;&#xFFFFFFFF;&bogus;".to_owned()),
        Just("<!DOCTYPE x [<!ENTITY a \"aaaaaaaaaa\">]>".to_owned()),
        Just("&a;&a;&a;".to_owned()),
        Just("\u{0}\u{feff}\u{fffd}".to_owned()),
        "\\PC{0,12}",
        "[<>&\"'= /a-z]{0,12}",
    ];
    prop::collection::vec(piece, 0..24).prop_map(|parts| parts.concat())
}

#[test]
fn fuzz_junit_xml() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("results.xml");
    let input = prop_oneof![3 => xml_text().prop_map(String::into_bytes), 1 => prop::collection::vec(any::<u8>(), 0..512)];
    fuzz("junit xml", 600, input, |bytes| {
        std::fs::write(&path, &bytes).expect("writing");
        if let Ok(cases) = read_junit(&path) {
            for case in cases {
                // Messages are cut to one line of at most 200 characters.
                if let Some(m) = case.message {
                    prop_assert!(m.chars().count() <= 200 && !m.contains('\n'), "message {:?}", m);
                }
            }
        }
        Ok(())
    });
    assert_memory_bounded("junit xml");
}

// --- JSONL ledgers and detector-script output ------------------------------------

fn json_line() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("1e999".to_owned()),
        Just("-0".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("\"\\ud800\"".to_owned()),
        Just("\"2026-01-05T09:00:00Z\"".to_owned()),
        "\"[ -~&&[^\"\\\\]]{0,8}\"",
        "-?[0-9]{1,25}(\\.[0-9]{1,5})?",
    ];
    let value = leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(("[a-z_]{1,6}", inner), 0..4).prop_map(|kv| format!(
                "{{{}}}",
                kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect::<Vec<_>>().join(",")
            )),
        ]
    });
    prop_oneof![
        6 => value,
        1 => (1usize..2000).prop_map(|depth| "[".repeat(depth)),
        1 => (1usize..300).prop_map(|depth| format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))),
        1 => "\\PC{0,20}",
    ]
}

#[test]
fn fuzz_jsonl_ledger() {
    let schema: BTreeMap<String, FieldType> = BTreeMap::from([
        ("amount".to_owned(), FieldType::Int),
        ("ratio".to_owned(), FieldType::Number),
        ("key".to_owned(), FieldType::String),
        ("ok".to_owned(), FieldType::Bool),
        ("reason".to_owned(), FieldType::NullOrString),
    ]);
    let required = ["key".to_owned(), "at".to_owned()];
    let text = prop::collection::vec(json_line(), 0..12).prop_map(|lines| lines.join("\n"));
    fuzz("jsonl ledger", 600, text, |text| {
        let (rows, bad) = parse_ledger(&text, &required, &schema);
        let non_empty = text.lines().filter(|l| !l.trim().is_empty()).count();
        prop_assert!(rows.len() <= non_empty);
        prop_assert!(bad.iter().all(|b| b.starts_with("line ")), "{:?}", bad);
        for row in &rows {
            for value in row.values() {
                if let Some(s) = value.as_str() {
                    let _ = parse_time(s);
                }
            }
        }
        let _ = parse_script_output(&text);
        Ok(())
    });
    // Times as ledgers and logs spell them.
    fuzz(
        "ledger times",
        600,
        prop_oneof![
            "[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:?[0-9]{2})?",
            // Digits of other scripts, which `\\d` matches.
            "[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[+-][0-9\u{660}-\u{669}\u{ff10}-\u{ff19}]{2}:?[0-9\u{660}-\u{669}]{2})",
            "[0-9\u{660}-\u{669}]{4}-[0-9]{2}-[0-9\u{966}-\u{96f}]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z",
            "-?[0-9]{1,30}(\\.[0-9]*)?(e[+-]?[0-9]{1,4})?",
            "\\PC{0,20}",
        ],
        |s| {
            let _ = parse_time(&s);
            Ok(())
        },
    );
    assert_memory_bounded("jsonl ledger");
}

// --- Unified diffs ------------------------------------------------------------------

fn diff_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("--- a/bucket.py".to_owned()),
        Just("+++ b/bucket.py".to_owned()),
        Just("--- /dev/null".to_owned()),
        Just("+++ b/../../etc/passwd".to_owned()),
        Just("+++ /abs\tdate".to_owned()),
        Just("diff --git a/x b/x".to_owned()),
        Just("index 0000..1111 100644".to_owned()),
        "@@ -[0-9]{1,2}(,[0-9]{1,2})? \\+[0-9]{1,2}(,[0-9]{1,2})? @@( [a-z]*)?",
        Just("@@ -99999999999999999999999,1 +1,18446744073709551616 @@".to_owned()),
        Just("@@ -0,0 +1 @@".to_owned()),
        " [a-z ]{0,8}",
        "-[a-z ]{0,8}",
        "\\+[a-z ]{0,8}",
        Just("\\ No newline at end of file".to_owned()),
        Just(String::new()),
        Just("\u{3000}".to_owned()),
        Just("\u{e9}t\u{e9}".to_owned()),
        "\\PC{0,10}",
    ];
    (prop::collection::vec(line, 0..24), any::<bool>()).prop_map(|(lines, crlf)| {
        let sep = if crlf { "\r\n" } else { "\n" };
        lines.join(sep)
    })
}

/// Lines that may sit between hunks and files of a diff that parses.
fn diff_noise() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("\u{3000}".to_owned()),
        Just("\u{a0}\u{2003}".to_owned()),
        Just("\\ No newline at end of file".to_owned()),
        Just("diff --git a/x b/\u{e9}".to_owned()),
        Just("index \u{e9}".to_owned()),
        Just("similarity index 90%".to_owned()),
        Just("rename from \u{3a3}".to_owned()),
    ]
}

/// Diffs that parse, or nearly: file headers and hunks whose counts match
/// their bodies (now and then off by one), with noise lines between them.
fn structured_diff() -> impl Strategy<Value = String> {
    let body_line = ("[ +-]", "[a-z\u{e9} ]{0,6}").prop_map(|(k, t)| format!("{k}{t}"));
    let hunk = (
        1usize..6,
        prop::collection::vec(body_line, 0..8),
        -1i64..=1,
        prop::collection::vec(diff_noise(), 0..3),
    );
    let file = ("[a-z]{1,4}(/[a-z]{1,3})?", prop::collection::vec(hunk, 1..4));
    prop::collection::vec(file, 1..3).prop_map(|files| {
        let mut out = Vec::new();
        for (path, hunks) in files {
            out.push(format!("--- a/{path}"));
            out.push(format!("+++ b/{path}"));
            for (start, body, skew, noise) in hunks {
                let old = body.iter().filter(|l| !l.starts_with('+')).count() as i64;
                let new = body.iter().filter(|l| !l.starts_with('-')).count() as i64;
                out.push(format!("@@ -{start},{} +{start},{} @@", (old + skew).max(0), new));
                out.extend(body);
                out.extend(noise);
            }
        }
        out.join("\n")
    })
}

#[test]
fn fuzz_unified_diffs() {
    let original = prop_oneof![Just(String::new()), "([a-z\u{e9} ]{0,6}\n){0,12}", "\\PC{0,40}"];
    let diff = prop_oneof![1 => diff_text(), 2 => structured_diff()];
    fuzz("unified diffs", 1500, (diff, original), |(diff, original)| {
        if let Ok(paths) = parse_unified_diff(&diff) {
            prop_assert!(paths.iter().all(|p| p != "/dev/null"));
        }
        if let Ok(parts) = split_diff(&diff) {
            for (path, part) in parts {
                prop_assert!(grader::tree::is_safe_relative(&path), "split_diff gave {:?}", path);
                let _ = apply_diff(&original, &part);
            }
        }
        let _ = apply_diff(&original, &diff);
        Ok(())
    });
    assert_memory_bounded("unified diffs");
}

// --- pytest logs ------------------------------------------------------------------

fn pytest_log() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just(
            "============================= test session starts =============================="
                .to_owned()
        ),
        Just("platform linux -- Python 3.12.3, pytest-8.3.2".to_owned()),
        Just("collected 3 items".to_owned()),
        Just(
            "test_bucket.py ..F                                                      [100%]"
                .to_owned()
        ),
        "(FAILED|ERROR|PASSED) [a-z_/.]{0,10}\\.py(::[A-Za-z_]{0,6}){0,3}( - [a-z ]{0,10})?",
        "=+ [0-9]{1,3} (failed|passed|error|errors|skipped)(, [0-9]{1,3} (failed|passed))? in [0-9.]{1,5}s( \\([0-9:]{1,8}\\))? =+",
        Just(
            "==== 99999999999999999999999 failed, 18446744073709551616 passed in 0.01s ===="
                .to_owned()
        ),
        Just("=== no tests ran in 0.00s ===".to_owned()),
        Just("=".repeat(5000)),
        "\\PC{0,30}",
    ];
    prop::collection::vec(line, 0..16).prop_map(|lines| lines.join("\n"))
}

#[test]
fn fuzz_pytest_logs() {
    fuzz("pytest logs", 500, pytest_log(), |text| {
        for expect in [LogExpect::Failed, LogExpect::Passed] {
            let problems = pytest_log_problems(&text, expect);
            prop_assert!(problems.iter().all(|p| !p.is_empty()));
        }
        let nodes = failed_nodes(&text);
        prop_assert!(nodes.iter().all(|n| n.contains("::")));
        // Output tails are masked the same way before they reach a receipt.
        let masked = normalize_output(&text);
        prop_assert_eq!(normalize_output(&masked), masked.clone(), "masking is not idempotent");
        Ok(())
    });
    assert_memory_bounded("pytest logs");
}

// --- Manifests -----------------------------------------------------------------------

/// The built-in manifests, as lines to recombine.
fn manifest_lines() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets");
    let mut lines = BTreeSet::new();
    for slug in ["token-bucket", "tax-rounding", "sticky-404", "intents-ledger"] {
        let text = std::fs::read_to_string(root.join(slug).join("packet.toml"))
            .expect("reading a built-in manifest");
        lines.extend(text.lines().map(str::to_owned));
    }
    lines.into_iter().collect()
}

#[test]
fn fuzz_manifests() {
    let pool = manifest_lines();
    let real = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets/token-bucket/packet.toml"),
    )
    .expect("manifest");
    let real_lines: Vec<String> = real.lines().map(str::to_owned).collect();
    let n = real_lines.len();
    let edits = prop::collection::vec(
        prop_oneof![
            // Replace a line with one from another manifest.
            (0..n, prop::sample::select(pool.clone())).prop_map(|(at, l)| (at, Some(l))),
            // Delete a line.
            (0..n).prop_map(|at| (at, None)),
            // Damage a line.
            (
                0..n,
                prop_oneof![
                    Just("id = \"hidden\"".to_owned()),
                    Just("target = \"/etc/passwd\"".to_owned()),
                    Just("lay = [{ from = \"../../x\", to = \"\" }]".to_owned()),
                    Just("[[step]]".to_owned()),
                    Just("[[failure]]".to_owned()),
                    Just("wall_secs = -1".to_owned()),
                    Just("memory_mb = 18446744073709551616".to_owned()),
                    Just("pattern = \"(\"".to_owned()),
                    Just("glob = \"[\"".to_owned()),
                    Just("x = \"\u{e9}\u{0}\"".to_owned()),
                    "\\PC{0,20}",
                ]
            )
                .prop_map(|(at, l)| (at, Some(l))),
        ],
        0..10,
    );
    let text = prop_oneof![
        4 => edits.prop_map(move |edits| {
            let mut lines: Vec<Option<String>> = real_lines.iter().cloned().map(Some).collect();
            for (at, line) in edits {
                lines[at] = line;
            }
            lines.into_iter().flatten().collect::<Vec<_>>().join("\n")
        }),
        1 => prop::collection::vec(prop::sample::select(pool), 0..40).prop_map(|l| l.join("\n")),
        1 => "\\PC{0,200}",
    ];
    fuzz("manifests", 500, text, |src| {
        match Manifest::parse("packet.toml", &src) {
            Ok(_) => {}
            Err(e) => {
                let message = e.to_string();
                prop_assert!(
                    message.contains("packet.toml"),
                    "the error does not name the file: {}",
                    message
                );
                prop_assert!(!e.problems.is_empty(), "an error with no problem");
                for line in e.problems.iter().filter_map(|p| p.line) {
                    prop_assert!(
                        line >= 1 && line <= src.lines().count().max(1) + 1,
                        "line {} of {}",
                        line,
                        src.lines().count()
                    );
                }
            }
        }
        Ok(())
    });
    assert_memory_bounded("manifests");
}
