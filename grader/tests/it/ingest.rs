//! Data-driven tests for safe zip ingestion. Each case builds an archive
//! (with the zip crate's writer, or as raw bytes for what the writer will not
//! produce), ingests it, and compares a rendering of the outcome: the listed
//! files on success, or the refusal's variant and message. Every refusal is
//! also checked to leave nothing behind.

use std::collections::BTreeMap;
use std::io::{Cursor, Write};
use std::path::Path;
use std::time::Instant;

use grader::ingest::{
    IngestError, IngestLimits, IngestOptions, Ingested, NORMALISED_LISTED, ingest, ingest_with,
    write_zip_from_dir,
};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

type Writer = ZipWriter<Cursor<Vec<u8>>>;

/// A fixed time used for entries: 2021-03-04 05:06:08 UTC.
const T: i64 = 1_614_834_368;

fn opts() -> SimpleFileOptions {
    SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .last_modified_time(DateTime::from_date_and_time(2021, 3, 4, 5, 6, 8).unwrap())
}

fn add(zip: &mut Writer, name: &str, data: &[u8]) {
    zip.start_file(name, opts()).unwrap();
    zip.write_all(data).unwrap();
}

/// Renders an ingestion outcome compactly: one line per file with size, the
/// first 12 hex digits of its SHA-256 and its mtime, or the refusal.
fn render(result: &Result<Ingested, IngestError>) -> String {
    match result {
        Ok(ingested) => {
            let mut out = String::new();
            for f in &ingested.files {
                let mtime = f.mtime.map_or("-".to_owned(), |t| t.to_string());
                out.push_str(&format!("{} {} {} {}\n", f.path, f.size, &f.sha256[..12], mtime));
            }
            out
        }
        Err(err) => {
            let debug = format!("{err:?}");
            let variant: String = debug.chars().take_while(|c| c.is_alphanumeric()).collect();
            format!("{variant}: {err}\n")
        }
    }
}

/// Ingests `bytes` into a fresh temporary directory and returns the outcome
/// rendered, after checking that a refusal leaves nothing behind.
fn run(bytes: &[u8], limits: &IngestLimits) -> (String, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let zip_path = tmp.path().join("in.zip");
    std::fs::write(&zip_path, bytes).unwrap();
    let dest = tmp.path().join("out");
    let result = ingest(&zip_path, &dest, limits);
    if result.is_err() {
        assert!(!dest.exists(), "a refusal left the destination behind");
        let names: Vec<_> =
            std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("in.zip")],
            "a refusal left files beside the archive"
        );
    } else {
        assert!(dest.is_dir());
    }
    (render(&result), tmp)
}

fn assert_rendered(actual: &str, expect: &str) {
    let expect = expect.trim_start_matches('\n');
    let expect: String =
        expect.lines().map(str::trim).filter(|l| !l.is_empty()).map(|l| format!("{l}\n")).collect();
    assert_eq!(actual, expect, "\nactual:\n{actual}\nexpected:\n{expect}");
}

fn build(f: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    f(&mut zip);
    zip.finish().unwrap().into_inner()
}

fn check(f: impl FnOnce(&mut Writer), expect: &str) {
    check_with(&IngestLimits::default(), f, expect);
}

fn check_with(limits: &IngestLimits, f: impl FnOnce(&mut Writer), expect: &str) {
    let (actual, _tmp) = run(&build(f), limits);
    assert_rendered(&actual, expect);
}

fn check_raw(bytes: &[u8], expect: &str) {
    let (actual, _tmp) = run(bytes, &IngestLimits::default());
    assert_rendered(&actual, expect);
}

// --- A raw archive builder for what the writer refuses to produce. ---

pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[derive(Clone, Debug)]
pub(crate) struct Raw {
    pub name: Vec<u8>,
    pub flags: u16,
    pub method: u16,
    pub data: Vec<u8>,
    pub crc: u32,
    pub usize_: u32,
    pub made_by: u16,
    pub external: u32,
    /// Point the central entry at another entry's local header.
    pub reuse_header_of: Option<usize>,
}

pub(crate) fn raw(name: &[u8], data: &[u8]) -> Raw {
    Raw {
        name: name.to_vec(),
        flags: 0,
        method: 0,
        data: data.to_vec(),
        crc: crc32(data),
        usize_: data.len() as u32,
        made_by: 0x031E,
        external: 0o100644 << 16,
        reuse_header_of: None,
    }
}

/// Lays out local headers and data, then the central directory and its end
/// record (with `count_override` in place of the true entry count).
pub(crate) fn raw_zip(entries: &[Raw], count_override: Option<u16>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    for e in entries {
        offsets.push(out.len() as u32);
        if e.reuse_header_of.is_some() {
            continue;
        }
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&e.flags.to_le_bytes());
        out.extend_from_slice(&e.method.to_le_bytes());
        out.extend_from_slice(&0x2CA4u16.to_le_bytes()); // 05:37:08
        out.extend_from_slice(&0x5264u16.to_le_bytes()); // 2021-03-04
        out.extend_from_slice(&e.crc.to_le_bytes());
        out.extend_from_slice(&(e.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.usize_.to_le_bytes());
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&e.name);
        out.extend_from_slice(&e.data);
    }
    let cd_start = out.len() as u32;
    for (i, e) in entries.iter().enumerate() {
        let offset = e.reuse_header_of.map_or(offsets[i], |j| offsets[j]);
        out.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        out.extend_from_slice(&e.made_by.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&e.flags.to_le_bytes());
        out.extend_from_slice(&e.method.to_le_bytes());
        out.extend_from_slice(&0x2CA4u16.to_le_bytes());
        out.extend_from_slice(&0x5264u16.to_le_bytes());
        out.extend_from_slice(&e.crc.to_le_bytes());
        out.extend_from_slice(&(e.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.usize_.to_le_bytes());
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0; 8]); // extra, comment, disk, internal attributes
        out.extend_from_slice(&e.external.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&e.name);
    }
    let cd_size = out.len() as u32 - cd_start;
    let count = count_override.unwrap_or(entries.len() as u16);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&cd_size.to_le_bytes());
    out.extend_from_slice(&cd_start.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// A fixed-Huffman deflate stream of `copies` × 258 zero bytes (plus one):
/// 13 bits per 258 bytes, so about 160:1.
pub(crate) fn deflated_zeros(copies: usize) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        acc: u64,
        n: u32,
    }
    impl Bits {
        fn put(&mut self, value: u64, len: u32) {
            self.acc |= value << self.n;
            self.n += len;
            while self.n >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.n -= 8;
            }
        }
        /// Huffman codes go most-significant bit first.
        fn code(&mut self, code: u64, len: u32) {
            let mut rev = 0;
            for i in 0..len {
                rev |= ((code >> i) & 1) << (len - 1 - i);
            }
            self.put(rev, len);
        }
    }
    let mut b = Bits { out: Vec::with_capacity(copies * 13 / 8 + 8), acc: 0, n: 0 };
    b.put(1, 1); // final block
    b.put(1, 2); // fixed Huffman
    b.code(0x30, 8); // literal 0
    for _ in 0..copies {
        b.code(0xC5, 8); // length 258
        b.code(0, 5); // distance 1
    }
    b.code(0, 7); // end of block
    b.put(0, 7);
    b.out
}

// --- Good archives. ---

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

// --- Path rules. ---

#[test]
fn ingest_refuses_traversal() {
    check(
        |z| add(z, "a/../../etc/passwd", b"x"),
        r#"PathTraversal: entry "a/../../etc/passwd" has a `..` component, which would escape the destination"#,
    );
}

#[test]
fn ingest_refuses_absolute_path() {
    check(
        |z| add(z, "/etc/passwd", b"x"),
        r#"AbsolutePath: entry "/etc/passwd" has an absolute path"#,
    );
}

#[test]
fn ingest_refuses_leading_backslash_as_absolute() {
    check_raw(
        &raw_zip(&[raw(b"\\evil", b"x")], None),
        r#"AbsolutePath: entry "\\evil" has an absolute path"#,
    );
}

#[test]
fn ingest_refuses_drive_letter() {
    check(
        |z| add(z, "C:/Windows/x", b"x"),
        r#"DriveLetter: entry "C:/Windows/x" starts with a Windows drive letter"#,
    );
}

#[test]
fn ingest_refuses_traversal_spelled_with_backslashes() {
    // Backslashes are read as separators first, so every path rule sees the
    // converted name.
    check_raw(
        &raw_zip(&[raw(b"dir\\..\\x", b"x")], None),
        r#"PathTraversal: entry "dir\\..\\x" has a `..` component, which would escape the destination"#,
    );
    check_raw(
        &raw_zip(&[raw(b"..\\..\\x", b"x")], None),
        r#"PathTraversal: entry "..\\..\\x" has a `..` component, which would escape the destination"#,
    );
    check_raw(
        &raw_zip(&[raw(b"mywork\\..\\..\\etc\\passwd", b"x")], None),
        r#"PathTraversal: entry "mywork\\..\\..\\etc\\passwd" has a `..` component, which would escape the destination"#,
    );
    check_raw(
        &raw_zip(&[raw(b"C:\\x", b"x")], None),
        r#"DriveLetter: entry "C:\\x" starts with a Windows drive letter"#,
    );
    check_raw(
        &raw_zip(&[raw(b"\\\\server\\share\\x", b"x")], None),
        r#"AbsolutePath: entry "\\\\server\\share\\x" has an absolute path"#,
    );
    check_raw(
        &raw_zip(&[raw(b"a\\\\b", b"x")], None),
        r#"EmptyComponent: entry "a\\\\b" has an empty or `.` path component"#,
    );
}

#[test]
fn ingest_refuses_collisions_after_backslash_conversion() {
    check_raw(
        &raw_zip(&[raw(b"src/a.py", b"1"), raw(b"src\\a.py", b"2")], None),
        r#"DuplicateName: entry "src\\a.py" appears more than once in the archive"#,
    );
    check_raw(
        &raw_zip(&[raw(b"src/a.py", b"1"), raw(b"SRC\\b.py", b"2")], None),
        r#"NameCollision: entries "SRC\\b.py" and "src/a.py" differ only by letter case or Unicode normalisation"#,
    );
    check_raw(
        &raw_zip(&[raw(b"a", b"1"), raw(b"a\\b", b"2")], None),
        r#"FileDirectoryConflict: entry "a" is a file, but "a\\b" uses it as a directory"#,
    );
}

#[test]
fn ingest_refuses_empty_component() {
    check_raw(
        &raw_zip(&[raw(b"a//b", b"x")], None),
        r#"EmptyComponent: entry "a//b" has an empty or `.` path component"#,
    );
}

#[test]
fn ingest_refuses_dot_component() {
    check_raw(
        &raw_zip(&[raw(b"./a", b"x")], None),
        r#"EmptyComponent: entry "./a" has an empty or `.` path component"#,
    );
}

#[test]
fn ingest_refuses_nul_and_control_characters() {
    check_raw(
        &raw_zip(&[raw(b"a\0b", b"x")], None),
        r#"ControlCharacter: entry "a\0b" has a NUL or control character in its name"#,
    );
    check_raw(
        &raw_zip(&[raw(b"a\x1b[31m", b"x")], None),
        r#"ControlCharacter: entry "a\u{1b}[31m" has a NUL or control character in its name"#,
    );
}

#[test]
fn ingest_refuses_long_path() {
    check_with(
        &IngestLimits { max_path_bytes: 8, ..IngestLimits::default() },
        |z| add(z, "abcdefghi", b"x"),
        r#"PathTooLong: entry "abcdefghi" has a 9-byte path, longer than the limit of 8 bytes"#,
    );
}

#[test]
fn ingest_refuses_deep_path() {
    check_with(
        &IngestLimits { max_path_depth: 3, ..IngestLimits::default() },
        |z| add(z, "a/b/c/d", b"x"),
        r#"PathTooDeep: entry "a/b/c/d" is 4 components deep, deeper than the limit of 3"#,
    );
}

#[test]
fn ingest_refuses_invalid_utf8_name_when_flagged() {
    let mut e = raw(b"bad\xff\xfe.txt", b"x");
    e.flags = 1 << 11;
    check_raw(
        &raw_zip(&[e], None),
        r#"InvalidUtf8Name: entry "bad\xff\xfe.txt" is flagged as UTF-8 but its name is not valid UTF-8 (invalid utf-8 sequence of 1 bytes from index 3)"#,
    );
}

// --- Entry types and encryption. ---

#[test]
fn ingest_refuses_symlink() {
    check(
        |z| z.add_symlink("link", "/etc/passwd", opts()).unwrap(),
        r#"Symlink: entry "link" is a symbolic link; only regular files and directories are accepted"#,
    );
}

#[test]
fn ingest_refuses_fifo_and_devices() {
    check(
        |z| {
            z.start_file("pipe", opts().external_attributes(0o010644 << 16)).unwrap();
        },
        r#"SpecialFile: entry "pipe" is a FIFO; only regular files and directories are accepted"#,
    );
    let mut e = raw(b"dev/sda", b"");
    e.external = 0o060660 << 16;
    check_raw(
        &raw_zip(&[e], None),
        r#"SpecialFile: entry "dev/sda" is a block device; only regular files and directories are accepted"#,
    );
}

#[test]
fn ingest_refuses_unknown_unix_type_as_special() {
    let mut e = raw(b"hard", b"");
    e.external = 0o110644 << 16;
    check_raw(
        &raw_zip(&[e], None),
        r#"SpecialFile: entry "hard" is a non-regular file (unix type 0o110000, such as a hard link); only regular files and directories are accepted"#,
    );
}

#[test]
fn ingest_refuses_encrypted() {
    let mut e = raw(b"secret.txt", b"xxxxxxxxxxxxsecret");
    e.flags = 1;
    check_raw(
        &raw_zip(&[e], None),
        r#"Encrypted: entry "secret.txt" is encrypted; encrypted entries are not accepted"#,
    );
}

#[test]
fn ingest_refuses_unsupported_compression() {
    let mut e = raw(b"a.bz2", b"x");
    e.method = 12;
    check_raw(
        &raw_zip(&[e], None),
        r#"UnsupportedCompression: entry "a.bz2" uses compression method 12; only stored (0) and deflate (8) are accepted"#,
    );
}

// --- Names that collide. ---

#[test]
fn ingest_refuses_duplicate_names() {
    check_raw(
        &raw_zip(&[raw(b"a.txt", b"1"), raw(b"a.txt", b"2")], None),
        r#"DuplicateName: entry "a.txt" appears more than once in the archive"#,
    );
}

#[test]
fn ingest_refuses_case_collision() {
    check(
        |z| {
            add(z, "Main.java", b"1");
            add(z, "main.java", b"2");
        },
        r#"NameCollision: entries "main.java" and "Main.java" differ only by letter case or Unicode normalisation"#,
    );
}

#[test]
fn ingest_refuses_case_collision_between_directories() {
    check(
        |z| {
            add(z, "Src/a", b"1");
            add(z, "src/b", b"2");
        },
        r#"NameCollision: entries "src/b" and "Src/a" differ only by letter case or Unicode normalisation"#,
    );
}

#[test]
fn ingest_refuses_unicode_case_collision() {
    check(
        |z| {
            add(z, "\u{3a3}.txt", b"1");
            add(z, "\u{3c3}.txt", b"2");
        },
        "NameCollision: entries \"\u{3c3}.txt\" and \"\u{3a3}.txt\" differ only by letter case or Unicode normalisation",
    );
}

#[test]
fn ingest_refuses_nfc_nfd_collision() {
    check(
        |z| {
            add(z, "caf\u{e9}", b"1");
            add(z, "cafe\u{301}", b"2");
        },
        "NameCollision: entries \"cafe\\u{301}\" and \"caf\u{e9}\" differ only by letter case or Unicode normalisation",
    );
}

#[test]
fn ingest_refuses_file_used_as_directory() {
    check(
        |z| {
            add(z, "a", b"file");
            add(z, "a/b", b"under");
        },
        r#"FileDirectoryConflict: entry "a" is a file, but "a/b" uses it as a directory"#,
    );
    check(
        |z| {
            add(z, "a/b", b"under");
            add(z, "a", b"file");
        },
        r#"FileDirectoryConflict: entry "a" is a file, but "a/b" uses it as a directory"#,
    );
}

// --- Sizes, ratios and bombs. ---

#[test]
fn ingest_refuses_too_many_entries() {
    check_with(
        &IngestLimits { max_entries: 2, ..IngestLimits::default() },
        |z| {
            for i in 0..3 {
                add(z, &format!("f{i}"), b"x");
            }
        },
        "TooManyEntries: the archive declares 3 entries, more than the limit of 2",
    );
}

#[test]
fn ingest_refuses_huge_eocd_count_before_parsing() {
    // A 32-bit end record claiming 65,535 entries over an empty directory.
    check_raw(
        &raw_zip(&[], Some(0xFFFF)),
        "TooManyEntries: the archive declares 65535 entries, more than the limit of 10000",
    );
}

#[test]
fn ingest_refuses_million_entry_zip64_claim_cheaply() {
    // A zip64 end record claiming a million entries, with its locator and a
    // 32-bit end record that defers to it.
    let mut out = Vec::new();
    out.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
    out.extend_from_slice(&44u64.to_le_bytes());
    out.extend_from_slice(&[45, 0, 45, 0]);
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&1_000_000u64.to_le_bytes());
    out.extend_from_slice(&1_000_000u64.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&[0xFF; 4]);
    out.extend_from_slice(&[0xFF; 8]);
    out.extend_from_slice(&[0; 2]);
    // The zip64 directory "ends" where its record starts: offset 0, size 0.
    check_raw(
        &out,
        "TooManyEntries: the archive declares 1000000 entries, more than the limit of 10000",
    );
}

#[test]
fn ingest_refuses_large_entry() {
    check_with(
        &IngestLimits { max_entry_bytes: 1000, ..IngestLimits::default() },
        |z| add(z, "big", &[7u8; 1001]),
        r#"EntryTooLarge: entry "big" decompresses to more than the per-entry limit of 1000 bytes"#,
    );
}

#[test]
fn ingest_refuses_large_total() {
    check_with(
        &IngestLimits { max_total_bytes: 1500, ..IngestLimits::default() },
        |z| {
            add(z, "one", &[1u8; 1000]);
            add(z, "two", &[2u8; 1000]);
        },
        r#"TotalTooLarge: the archive decompresses to more than the total limit of 1500 bytes (reached at entry "two")"#,
    );
}

#[test]
fn ingest_refuses_entry_ratio() {
    check_with(
        &IngestLimits { max_ratio: 10, ..IngestLimits::default() },
        |z| {
            add(z, "pad", &pseudo_random(100_000));
            add(z, "zeros", &[0u8; 1 << 20]);
        },
        r#"EntryRatio: entry "zeros" expands from 1033 compressed bytes past the ratio limit of 10:1"#,
    );
}

#[test]
fn ingest_small_compressible_file_passes_ratio_floor() {
    check_with(
        &IngestLimits { max_ratio: 2, ..IngestLimits::default() },
        |z| add(z, "zeros", &[0u8; 60_000]),
        "zeros 60000 0946e2eb0fb9 1614834368",
    );
}

#[test]
fn ingest_refuses_total_ratio() {
    // Many entries each under the floor, adding up past the overall ratio.
    check_with(
        &IngestLimits { max_ratio: 5, ..IngestLimits::default() },
        |z| {
            for i in 0..8 {
                add(z, &format!("z{i}"), &[0u8; 60_000]);
            }
        },
        r#"TotalRatio: the archive expands from 600 compressed bytes past the overall ratio limit of 5:1 (reached at entry "z1")"#,
    );
}

fn pseudo_random(len: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn ingest_refuses_42_zip_style_bomb_quickly() {
    // Sixteen entries, each declaring 4 GiB and really inflating to ~82 MB
    // from 512 KiB: 64 GiB declared in an 8 MiB archive.
    let data = deflated_zeros(512 * 1024 * 8 / 13);
    let entries: Vec<Raw> = (0..16)
        .map(|i| {
            let mut e = raw(format!("lib{i:02}.dat").as_bytes(), &[]);
            e.method = 8;
            e.data = data.clone();
            e.crc = 0;
            e.usize_ = 0xFFFF_FFF0;
            e
        })
        .collect();
    let started = Instant::now();
    check_raw(
        &raw_zip(&entries, None),
        r#"EntryTooLarge: entry "lib00.dat" decompresses to more than the per-entry limit of 67108864 bytes"#,
    );
    assert!(started.elapsed().as_secs() < 20, "the bomb took {:?}", started.elapsed());
}

#[test]
fn ingest_refuses_overlapping_entries() {
    // Two names sharing one local header and its data, as in overlapping
    // (non-recursive) zip bombs.
    let mut second = raw(b"b.txt", b"shared");
    second.reuse_header_of = Some(0);
    check_raw(
        &raw_zip(&[raw(b"a.txt", b"shared"), second], None),
        r#"OverlappingEntries: entry "b.txt" overlaps "a.txt" in the archive, as in overlapping-entry zip bombs"#,
    );
}

#[test]
fn ingest_refuses_entry_running_into_central_directory() {
    let mut bytes = raw_zip(&[raw(b"a.txt", b"abc")], None);
    // Grow the declared compressed size in both headers past the data.
    let cd = bytes.len() - 22 - 46 - 5;
    bytes[18..22].copy_from_slice(&40u32.to_le_bytes());
    bytes[cd + 20..cd + 24].copy_from_slice(&40u32.to_le_bytes());
    check_raw(
        &bytes,
        r#"OverlappingEntries: entry "a.txt" overlaps the central directory in the archive, as in overlapping-entry zip bombs"#,
    );
}

// --- Nesting. ---

#[test]
fn ingest_refuses_any_nested_zip_when_nesting_is_zero() {
    let inner = build(|z| add(z, "x", b"x"));
    check_with(
        &IngestLimits { max_nesting: 0, ..IngestLimits::default() },
        |z| {
            // The extension does not matter, only the magic bytes.
            z.start_file("notes.txt", opts()).unwrap();
            z.write_all(&inner).unwrap();
        },
        r#"NestingTooDeep: entry "notes.txt" nests archives 1 deep, deeper than the limit of 0"#,
    );
}

#[test]
fn ingest_refuses_zip_in_zip_in_zip_at_default_limit() {
    let innermost = build(|z| add(z, "x", b"x"));
    let middle = build(|z| {
        z.start_file("deeper.zip", opts()).unwrap();
        z.write_all(&innermost).unwrap();
    });
    check(
        |z| {
            z.start_file("outer.zip", opts()).unwrap();
            z.write_all(&middle).unwrap();
        },
        r#"NestingTooDeep: entry "outer.zip" -> "deeper.zip" nests archives 2 deep, deeper than the limit of 1"#,
    );
}

#[test]
fn ingest_refuses_three_levels_when_two_allowed() {
    let l3 = build(|z| add(z, "x", b"x"));
    let l2 = build(|z| add(z, "l3.zip", &l3));
    let l1 = build(|z| add(z, "l2.zip", &l2));
    check_with(
        &IngestLimits { max_nesting: 2, ..IngestLimits::default() },
        |z| add(z, "l1.zip", &l1),
        r#"NestingTooDeep: entry "l1.zip" -> "l2.zip" -> "l3.zip" nests archives 3 deep, deeper than the limit of 2"#,
    );
}

#[test]
fn ingest_refuses_unreadable_nested_zip() {
    check(
        |z| add(z, "fake.zip", b"PK\x03\x04 but nothing else"),
        r#"NestedUnreadable: entry "fake.zip" is a zip archive that cannot be inspected for nested archives: the archive could not be read: the file is 21 bytes, too short to be a zip archive"#,
    );
}

// --- Damaged archives and the destination. ---

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

// --- How people really zip (issue #16): the same files, zipped each way, ingest
// to the same tree. ---

/// The workspace every style below zips: nested folders, a cache folder, a
/// `.git` folder and CRLF line endings.
const WORK: &[(&str, &[u8])] = &[
    ("NOTES.md", b"# Notes\r\nchose a monotonic clock\r\n"),
    ("bucket.py", b"class Bucket:\n    pass\n"),
    ("tests/test_bucket.py", b"def test_it():\n    assert True\n"),
    ("__pycache__/bucket.cpython-312.pyc", b"\x6f\x0d\x0d\x0a compiled"),
    (".pytest_cache/v/cache/lastfailed", b"{}"),
    (".git/HEAD", b"ref: refs/heads/main\n"),
];

/// The folders of `WORK`, parents first, with a trailing slash.
fn work_dirs() -> Vec<String> {
    let mut dirs = std::collections::BTreeSet::new();
    for (path, _) in WORK {
        let mut at = 0;
        while let Some(slash) = path[at..].find('/') {
            dirs.insert(format!("{}/", &path[..at + slash]));
            at += slash + 1;
        }
    }
    dirs.into_iter().collect()
}

fn raw_dir(name: &[u8]) -> Raw {
    let mut e = raw(name, b"");
    e.external = 0o40755 << 16;
    e
}

/// `cd mywork && zip -r ../sub.zip .`: the files at the root.
fn zipped_flat() -> Vec<u8> {
    let mut entries: Vec<Raw> = work_dirs().iter().map(|d| raw_dir(d.as_bytes())).collect();
    entries.extend(WORK.iter().map(|(p, data)| raw(p.as_bytes(), data)));
    raw_zip(&entries, None)
}

/// `zip -r sub.zip mywork/`, or "Compress" in a file manager: one folder.
fn zipped_in_folder() -> Vec<u8> {
    let mut entries = vec![raw_dir(b"mywork/")];
    entries.extend(work_dirs().iter().map(|d| raw_dir(format!("mywork/{d}").as_bytes())));
    entries.extend(WORK.iter().map(|(p, data)| raw(format!("mywork/{p}").as_bytes(), data)));
    raw_zip(&entries, None)
}

/// macOS Finder's "Compress": the folder, `.DS_Store` files in it, and an
/// AppleDouble `._` twin of every file under `__MACOSX/`.
fn zipped_by_finder() -> Vec<u8> {
    let apple_double = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ";
    let mut entries = vec![raw_dir(b"mywork/")];
    entries.push(raw(b"mywork/.DS_Store", b"\x00\x00\x00\x01Bud1"));
    for d in work_dirs() {
        entries.push(raw_dir(format!("mywork/{d}").as_bytes()));
        entries.push(raw(format!("mywork/{d}.DS_Store").as_bytes(), b"\x00\x00\x00\x01Bud1"));
    }
    for (p, data) in WORK {
        entries.push(raw(format!("mywork/{p}").as_bytes(), data));
    }
    entries.push(raw_dir(b"__MACOSX/"));
    entries.push(raw_dir(b"__MACOSX/mywork/"));
    for (p, _) in WORK {
        let (dir, file) = p.rsplit_once('/').map_or(("", *p), |(d, f)| (d, f));
        let twin = if dir.is_empty() {
            format!("__MACOSX/mywork/._{file}")
        } else {
            format!("__MACOSX/mywork/{dir}/._{file}")
        };
        entries.push(raw(twin.as_bytes(), apple_double));
    }
    entries.push(raw(b"__MACOSX/mywork/._.DS_Store", apple_double));
    raw_zip(&entries, None)
}

/// Windows PowerShell 5.1's `Compress-Archive -Path mywork`: `\` between
/// components, no folder entries, made on a DOS host; Explorer's
/// `Thumbs.db` and `desktop.ini` come along.
fn zipped_by_powershell() -> Vec<u8> {
    let dos = |mut e: Raw| {
        e.made_by = 0x0014;
        e.external = 0x20;
        e
    };
    let mut entries: Vec<Raw> = WORK
        .iter()
        .map(|(p, data)| dos(raw(format!("mywork\\{}", p.replace('/', "\\")).as_bytes(), data)))
        .collect();
    entries.push(dos(raw(b"mywork\\Thumbs.db", b"\xd0\xcf\x11\xe0")));
    entries.push(dos(raw(b"mywork\\tests\\DESKTOP.INI", b"[.ShellClassInfo]\r\n")));
    raw_zip(&entries, None)
}

/// Every file under `dir`, relative path and contents, in path order.
fn tree_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().strip_prefix(dir).unwrap().to_str().unwrap().to_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn ingest_bytes(
    bytes: &[u8],
    options: &IngestOptions,
) -> (Ingested, Vec<(String, Vec<u8>)>, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let zip_path = tmp.path().join("in.zip");
    std::fs::write(&zip_path, bytes).unwrap();
    let dest = tmp.path().join("out");
    let got = ingest_with(&zip_path, &dest, &IngestLimits::default(), options)
        .unwrap_or_else(|e| panic!("refused: {e}"));
    let tree = tree_of(&dest);
    (got, tree, tmp)
}

#[test]
fn ingest_every_zip_style_gives_the_flat_tree() {
    let options = IngestOptions::default();
    let (flat, flat_tree, _t) = ingest_bytes(&zipped_flat(), &options);
    // The flat zip itself: every file kept, caches and `.git` included,
    // bytes (CRLF) untouched, nothing normalised.
    let want: Vec<(String, Vec<u8>)> = {
        let mut w: Vec<_> = WORK.iter().map(|(p, d)| (p.to_string(), d.to_vec())).collect();
        w.sort();
        w
    };
    assert_eq!(flat_tree, want);
    assert!(flat.normalised.is_empty(), "{:?}", flat.normalised);
    assert!(flat.normalised.summary().is_empty());

    for (style, bytes) in [
        ("zip -r mywork/", zipped_in_folder()),
        ("macOS Finder", zipped_by_finder()),
        ("PowerShell 5.1", zipped_by_powershell()),
    ] {
        let (got, tree, _t) = ingest_bytes(&bytes, &options);
        assert_eq!(tree, flat_tree, "{style}: the tree differs from the flat zip's");
        assert_eq!(
            render(&Ok(got.clone())),
            render(&Ok(flat.clone())),
            "{style}: the listing differs"
        );
        assert_eq!(got.total_bytes, flat.total_bytes, "{style}");
        assert_eq!(got.normalised.unwrapped.as_deref(), Some("mywork"), "{style}");
        assert!(!got.normalised.summary().is_empty(), "{style}: the summary says nothing");
    }

    let (finder, _, _t) = ingest_bytes(&zipped_by_finder(), &options);
    assert_eq!(
        finder.normalised.dropped,
        [
            "mywork/.DS_Store",
            "mywork/.git/.DS_Store",
            "mywork/.pytest_cache/.DS_Store",
            "mywork/.pytest_cache/v/.DS_Store",
            "mywork/.pytest_cache/v/cache/.DS_Store",
            "mywork/__pycache__/.DS_Store",
            "mywork/tests/.DS_Store",
            "__MACOSX/mywork/._NOTES.md",
            "__MACOSX/mywork/._bucket.py",
            "__MACOSX/mywork/tests/._test_bucket.py",
            "__MACOSX/mywork/__pycache__/._bucket.cpython-312.pyc",
            "__MACOSX/mywork/.pytest_cache/v/cache/._lastfailed",
            "__MACOSX/mywork/.git/._HEAD",
            "__MACOSX/mywork/._.DS_Store",
        ]
    );
    assert!(finder.normalised.backslashes.is_empty());

    let (ps, _, _t) = ingest_bytes(&zipped_by_powershell(), &options);
    assert_eq!(ps.normalised.dropped, ["mywork/Thumbs.db", "mywork/tests/DESKTOP.INI"]);
    assert_eq!(ps.normalised.backslashes.len(), WORK.len() + 2);
    assert_eq!(ps.normalised.backslashes[2], "mywork\\tests\\test_bucket.py");
    let summary = ps.normalised.summary().join("\n");
    assert!(
        summary.contains("8 entries used `\\` as the folder separator")
            && summary.contains("Thumbs.db"),
        "{summary}"
    );
}

#[test]
fn ingest_unwraps_only_one_level_and_only_a_lone_folder() {
    let run = |entries: &[Raw], names: &[&str]| {
        let options =
            IngestOptions { workspace_names: names.iter().map(|n| n.to_string()).collect() };
        let (got, _, _t) = ingest_bytes(&raw_zip(entries, None), &options);
        let paths: Vec<String> = got.files.iter().map(|f| f.path.clone()).collect();
        (paths, got.normalised.unwrapped)
    };
    let f = |name: &str| raw(name.as_bytes(), b"x");
    // One level only.
    assert_eq!(
        run(&[f("outer/inner/a.py")], &[]),
        (vec!["inner/a.py".into()], Some("outer".into()))
    );
    // A file beside the folder: the layout is the candidate's, kept.
    assert_eq!(
        run(&[f("mywork/a.py"), f("README.md")], &[]),
        (vec!["README.md".into(), "mywork/a.py".into()], None)
    );
    // OS metadata beside it does not count.
    assert_eq!(
        run(&[f("mywork/a.py"), f("__MACOSX/._mywork"), f("Thumbs.db")], &[]),
        (vec!["a.py".into()], Some("mywork".into()))
    );
    // A folder the packet's own workspace has (its starter is only
    // `taxlib/`) is part of the workspace, in any letter case.
    assert_eq!(
        run(&[f("taxlib/rounding.py"), f("taxlib/__init__.py")], &["taxlib", "tests"]).1,
        None
    );
    assert_eq!(
        run(&[f("TaxLib/rounding.py")], &["taxlib"]),
        (vec!["TaxLib/rounding.py".into()], None)
    );
    // The same zip with no workspace names is unwrapped: the names decide.
    assert_eq!(
        run(&[f("taxlib/rounding.py")], &[]),
        (vec!["rounding.py".into()], Some("taxlib".into()))
    );
    // A hidden folder alone (`.git/`) is not a workspace folder.
    assert_eq!(run(&[f(".git/HEAD")], &[]), (vec![".git/HEAD".into()], None));
    // An empty folder, or a lone file, has nothing to unwrap.
    assert_eq!(run(&[raw_dir(b"mywork/")], &[]), (vec![], None));
    assert_eq!(run(&[f("mywork")], &[]), (vec!["mywork".into()], None));
}

#[test]
fn ingest_workspace_names_come_from_the_packet_folders() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("starter/taxlib")).unwrap();
    std::fs::write(tmp.path().join("starter/allowlist.txt"), "x").unwrap();
    std::fs::create_dir_all(tmp.path().join("sample")).unwrap();
    std::fs::write(tmp.path().join("sample/NOTES.md"), "x").unwrap();
    let options = IngestOptions::for_workspace(&[
        tmp.path().join("starter"),
        tmp.path().join("sample"),
        tmp.path().join("absent"),
    ])
    .unwrap();
    let names: Vec<&str> = options.workspace_names.iter().map(String::as_str).collect();
    assert_eq!(names, ["NOTES.md", "allowlist.txt", "taxlib"]);
}

#[test]
fn ingest_os_metadata_is_still_held_to_every_rule() {
    // Dropping happens after the checks: metadata names cannot smuggle
    // anything past them.
    let mut link = raw(b"mywork/.DS_Store", b"/etc/passwd");
    link.external = 0o120777 << 16;
    check_raw(
        &raw_zip(&[raw(b"mywork/a.py", b"x"), link], None),
        r#"Symlink: entry "mywork/.DS_Store" is a symbolic link; only regular files and directories are accepted"#,
    );
    check_raw(
        &raw_zip(&[raw(b"__MACOSX/../../x", b"x")], None),
        r#"PathTraversal: entry "__MACOSX/../../x" has a `..` component, which would escape the destination"#,
    );
    let mut bad = raw(b"__MACOSX/._a", b"hello");
    bad.crc ^= 1;
    // Not extracted, so its CRC is never read; the rest is extracted.
    let (out, tmp) = run(&raw_zip(&[raw(b"a.py", b"x"), bad], None), &IngestLimits::default());
    assert_rendered(&out, "a.py 1 2d711642b726 1614836228");
    assert!(!tmp.path().join("out/__MACOSX").exists());
}

#[test]
fn ingest_lists_of_what_was_normalised_are_bounded() {
    let mut entries = vec![raw(b"a.py", b"x")];
    for i in 0..(NORMALISED_LISTED + 7) {
        entries.push(raw(format!("d{i}\\.DS_Store").as_bytes(), b"m"));
    }
    let (got, tree, _t) = ingest_bytes(&raw_zip(&entries, None), &IngestOptions::default());
    assert_eq!(tree, vec![("a.py".to_owned(), b"x".to_vec())]);
    let n = &got.normalised;
    assert_eq!((n.dropped.len(), n.dropped_unlisted), (NORMALISED_LISTED, 7));
    assert_eq!((n.backslashes.len(), n.backslashes_unlisted), (NORMALISED_LISTED, 7));
    assert!(n.summary().iter().all(|line| line.ends_with("and 7 more")), "{:?}", n.summary());
}

#[test]
fn ingest_record_without_normalised_still_parses_and_flat_omits_it() {
    let old = r#"{"dir":"/x","archive_sha256":"ab","files":[],"total_bytes":0}"#;
    let parsed: Ingested = serde_json::from_str(old).unwrap();
    assert!(parsed.normalised.is_empty());
    assert_eq!(serde_json::to_string(&parsed).unwrap(), old);
    let (finder, _, _t) = ingest_bytes(&zipped_by_finder(), &IngestOptions::default());
    let json = serde_json::to_value(&finder).unwrap();
    assert_eq!(json["normalised"]["unwrapped"], "mywork");
}

/// `token-bucket`'s sample, zipped flat and as macOS Finder zips its folder
/// (`mywork/` plus `__MACOSX/` twins and `.DS_Store` files), grades the same:
/// the same decision, score, criteria and findings, and the same workspace.
#[test]
fn ingest_token_bucket_zipped_by_finder_grades_as_flat() {
    use grader::grade::GradeOptions;
    use grader::manifest::TIME_BASE;
    use grader::packet::Packet;
    use grader::tree::copy_path;

    let packet =
        Packet::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets/token-bucket"))
            .expect("loading token-bucket");
    let tmp = tempfile::tempdir().unwrap();
    let flat_dir = tmp.path().join("flat");
    copy_path(&packet.sample_dir(), &flat_dir).unwrap();
    let finder_dir = tmp.path().join("finder");
    copy_path(&packet.sample_dir(), &finder_dir.join("mywork")).unwrap();
    std::fs::write(finder_dir.join("mywork/.DS_Store"), b"\x00\x00\x00\x01Bud1").unwrap();
    std::fs::create_dir_all(finder_dir.join("__MACOSX/mywork")).unwrap();
    for name in std::fs::read_dir(packet.sample_dir()).unwrap() {
        let name = name.unwrap().file_name().into_string().unwrap();
        std::fs::write(
            finder_dir.join(format!("__MACOSX/mywork/._{name}")),
            b"\x00\x05\x16\x07Mac OS X",
        )
        .unwrap();
    }
    let (flat_zip, finder_zip) = (tmp.path().join("flat.zip"), tmp.path().join("finder.zip"));
    write_zip_from_dir(&flat_dir, &flat_zip, &BTreeMap::new(), TIME_BASE).unwrap();
    write_zip_from_dir(&finder_dir, &finder_zip, &BTreeMap::new(), TIME_BASE).unwrap();

    let grade = |zip: &Path| {
        crate::grader()
            .grade_zip(&packet, zip, &GradeOptions::default())
            .unwrap_or_else(|e| panic!("grading {}: {e}", zip.display()))
    };
    let flat = grade(&flat_zip);
    let finder = grade(&finder_zip);
    let findings = |c: &grader::grade::Scorecard| -> Vec<(String, String)> {
        c.findings.iter().map(|f| (f.id.clone(), f.evidence.join(" | "))).collect()
    };
    // The honest sample grades clean flat, so "the same" is a strong claim.
    assert_eq!(flat.scoring.decision, "keep", "flat: {:?}", findings(&flat));
    assert!(flat.findings.is_empty(), "flat: {:?}", findings(&flat));
    assert_eq!(findings(&finder), findings(&flat));
    assert_eq!(
        (finder.scoring.decision.as_str(), finder.scoring.score, finder.scoring.max_score),
        (flat.scoring.decision.as_str(), flat.scoring.score, flat.scoring.max_score)
    );
    assert_eq!(
        serde_json::to_value(&finder.scoring.criteria).unwrap(),
        serde_json::to_value(&flat.scoring.criteria).unwrap()
    );
    assert_eq!(finder.receipt.submission.files, flat.receipt.submission.files);
    assert_eq!(
        finder.receipt.submission.workspace_digest,
        flat.receipt.submission.workspace_digest
    );
    // The receipt says what was normalised; the flat one says nothing.
    assert!(flat.receipt.submission.normalised.is_empty());
    let n = &finder.receipt.submission.normalised;
    assert_eq!(n.unwrapped.as_deref(), Some("mywork"));
    assert!(
        n.dropped.iter().any(|d| d == "mywork/.DS_Store")
            && n.dropped.iter().any(|d| d == "__MACOSX/mywork/._bucket.py"),
        "{n:?}"
    );
}
