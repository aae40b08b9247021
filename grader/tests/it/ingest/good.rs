//! Good archives: what ingestion keeps, and the writer round trip.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use grader::ingest::{IngestLimits, ingest, write_zip_from_dir};

use super::*;

#[test]
fn ingest_good_nested_dirs_unicode_empty_and_mtimes() {
    check(
        |z| {
            z.add_directory("src/", opts()).unwrap();
            add(z, "src/main.rs", b"fn main() {}\n");
            add(z, "src/deep/er/mod.rs", b"");
            add(z, "donn\u{e9}es/\u{65e5}\u{672c}.txt", b"unicode");
            add(z, "README.md", b"# hi\n");
        },
        "
        README.md 5 045d2d07c2db 1614834368
        donn\u{e9}es/\u{65e5}\u{672c}.txt 7 2fcf76a4c3c7 1614834368
        src/deep/er/mod.rs 0 e3b0c44298fc 1614834368
        src/main.rs 13 536e506bb909 1614834368
        ",
    );
}

#[test]
fn ingest_good_contents_hashes_permissions_and_archive_hash() {
    let bytes = build(|z| {
        z.start_file("run.sh", opts().unix_permissions(0o755)).unwrap();
        z.write_all(b"#!/bin/sh\necho hi\n").unwrap();
        add(z, "data/plain.txt", b"plain");
    });
    let tmp = tempfile::tempdir().unwrap();
    let zip_path = tmp.path().join("in.zip");
    std::fs::write(&zip_path, &bytes).unwrap();
    let dest = tmp.path().join("out");
    let got = ingest(&zip_path, &dest, &IngestLimits::default()).unwrap();
    use sha2::Digest;
    assert_eq!(got.archive_sha256, hex::encode(sha2::Sha256::digest(&bytes)));
    assert_eq!(got.total_bytes, 23);
    assert_eq!(std::fs::read(dest.join("run.sh")).unwrap(), b"#!/bin/sh\necho hi\n");
    assert_eq!(got.files[1].sha256, hex::encode(sha2::Sha256::digest(b"#!/bin/sh\necho hi\n")));
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dest.join("run.sh")), 0o755);
    assert_eq!(mode(&dest.join("data/plain.txt")), 0o644);
    assert_eq!(mode(&dest.join("data")), 0o755);
}

#[test]
fn ingest_good_extended_timestamp_wins_over_dos_time() {
    check(
        |z| {
            let o = opts().with_extended_timestamp(Some(1_700_000_001), None, None).unwrap();
            z.start_file("a.txt", o).unwrap();
            z.write_all(b"x").unwrap();
        },
        "a.txt 1 2d711642b726 1700000001",
    );
}

#[test]
fn ingest_good_cp437_name_without_utf8_flag() {
    let mut e = raw(b"caf\x82.txt", b"cp437");
    e.made_by = 0x0014;
    e.external = 0x20;
    check_raw(&raw_zip(&[e], None), "caf\u{e9}.txt 5 a230ff302a8d 1614836228");
}

#[test]
fn ingest_good_zip_inside_zip_at_depth_one() {
    let inner = build(|z| add(z, "inner.txt", b"inside"));
    check_with(
        &IngestLimits { max_nesting: 1, ..IngestLimits::default() },
        |z| {
            add(z, "README.md", b"# hi\n");
            z.start_file("vendor/lib.jar", opts()).unwrap();
            z.write_all(&inner).unwrap();
        },
        &format!(
            "README.md 5 045d2d07c2db 1614834368\nvendor/lib.jar {} {} 1614834368",
            inner.len(),
            &sha_hex(&inner)[..12]
        ),
    );
}

fn sha_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

#[test]
fn ingest_good_nesting_two_levels_when_allowed() {
    let innermost = build(|z| add(z, "x.txt", b"x"));
    let middle = build(|z| {
        z.start_file("m.zip", opts()).unwrap();
        z.write_all(&innermost).unwrap();
    });
    let (out, _tmp) = run(
        &build(|z| {
            z.start_file("outer.bin", opts()).unwrap();
            z.write_all(&middle).unwrap();
        }),
        &IngestLimits { max_nesting: 2, ..IngestLimits::default() },
    );
    assert!(out.starts_with("outer.bin "), "{out}");
}

#[test]
fn ingest_write_zip_from_dir_round_trips_deterministically() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("pkg/sub")).unwrap();
    std::fs::write(src.join("pkg/sub/a.py"), "print(1)\n").unwrap();
    std::fs::write(src.join("b.txt"), "bee").unwrap();
    let times = BTreeMap::from([("b.txt".to_owned(), 1_700_000_000)]);
    let (one, two) = (tmp.path().join("1.zip"), tmp.path().join("2.zip"));
    write_zip_from_dir(&src, &one, &times, T).unwrap();
    write_zip_from_dir(&src, &two, &times, T).unwrap();
    assert_eq!(std::fs::read(&one).unwrap(), std::fs::read(&two).unwrap());
    let got = ingest(&one, &tmp.path().join("out"), &IngestLimits::default()).unwrap();
    let (actual, _) = (render(&Ok(got)), ());
    assert_rendered(
        &actual,
        "
        b.txt 3 62cb81b5904a 1700000000
        pkg/sub/a.py 9 cc42155088fc 1614834368
        ",
    );
}
