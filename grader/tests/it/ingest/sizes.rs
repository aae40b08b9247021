//! Sizes, ratios and bombs, and nested archives.

use std::io::Write;
use std::time::Instant;

use grader::ingest::IngestLimits;

use super::*;

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
