//! Damaged archives, and the destination left as it was.

use grader::ingest::{IngestError, IngestLimits, ingest};

use super::*;

#[test]
fn ingest_refuses_non_zip() {
    check_raw(
        b"just some text that is long enough to look at",
        "Unreadable: the archive could not be read: no end-of-central-directory record: this is not a zip archive, or it is truncated",
    );
}

#[test]
fn ingest_refuses_truncated_zip() {
    let bytes = build(|z| add(z, "a.txt", &pseudo_random(5000)));
    check_raw(
        &bytes[..bytes.len() / 2],
        "Unreadable: the archive could not be read: no end-of-central-directory record: this is not a zip archive, or it is truncated",
    );
}

#[test]
fn ingest_refuses_crc_mismatch() {
    let mut e = raw(b"a.txt", b"hello");
    e.crc ^= 1;
    check_raw(&raw_zip(&[e], None), r#"CrcMismatch: entry "a.txt" failed its CRC-32 check"#);
}

#[test]
fn ingest_refuses_size_lie() {
    let mut e = raw(b"a.txt", b"hello world");
    e.usize_ = 5;
    check_raw(
        &raw_zip(&[e], None),
        r#"SizeMismatch: entry "a.txt" decompresses to more bytes than its declared size"#,
    );
}

#[test]
fn ingest_refuses_existing_destination_and_leaves_it() {
    let tmp = tempfile::tempdir().unwrap();
    let zip_path = tmp.path().join("in.zip");
    std::fs::write(&zip_path, build(|z| add(z, "a", b"a"))).unwrap();
    let dest = tmp.path().join("out");
    std::fs::create_dir(&dest).unwrap();
    std::fs::write(dest.join("keep"), b"mine").unwrap();
    let err = ingest(&zip_path, &dest, &IngestLimits::default()).unwrap_err();
    assert!(matches!(err, IngestError::DestinationExists { .. }), "{err}");
    assert_eq!(std::fs::read(dest.join("keep")).unwrap(), b"mine");
}

#[test]
fn ingest_refusal_after_extraction_started_removes_everything() {
    // The first entries are written before the last one fails its CRC.
    let mut bad = raw(b"z/last.txt", b"hello");
    bad.crc ^= 1;
    check_raw(
        &raw_zip(&[raw(b"a/one.txt", b"1"), raw(b"b/two.txt", b"2"), bad], None),
        r#"CrcMismatch: entry "z/last.txt" failed its CRC-32 check"#,
    );
}
