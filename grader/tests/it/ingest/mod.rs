//! Data-driven tests for safe zip ingestion. Each case builds an archive
//! (with the zip crate's writer, or as raw bytes for what the writer will not
//! produce), ingests it, and compares a rendering of the outcome: the listed
//! files on success, or the refusal's variant and message. Every refusal is
//! also checked to leave nothing behind.

use std::io::{Cursor, Write};

use grader::ingest::{IngestError, IngestLimits, Ingested, ingest};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

mod damaged;
mod entries;
mod good;
mod paths;
mod sizes;
mod zip_styles;

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
