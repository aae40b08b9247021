//! A small, bounded reader for the zip end-of-central-directory record, the
//! central directory and the local headers.
//!
//! The zip crate is only asked to decompress entries after this module has
//! checked the entry count, the names and the layout, so that a hostile
//! directory is refused before anything allocates in proportion to it.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;

use super::IngestError;

const EOCD_SIG: u32 = 0x0605_4b50;
const EOCD64_LOCATOR_SIG: u32 = 0x0706_4b50;
const EOCD64_SIG: u32 = 0x0606_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const LOCAL_SIG: u32 = 0x0403_4b50;
const EOCD_LEN: u64 = 22;
const LOCAL_HEADER_LEN: u64 = 30;

/// Where the central directory is and how many entries it claims.
#[derive(Debug, Clone, Copy)]
pub(super) struct EndRecord {
    pub entries: u64,
    pub cd_offset: u64,
    pub cd_size: u64,
}

/// One central-directory entry, as declared.
#[derive(Debug, Clone)]
pub(super) struct RawEntry {
    pub made_by: u16,
    pub flags: u16,
    pub method: u16,
    pub dos_time: u16,
    pub dos_date: u16,
    pub compressed_size: u64,
    pub uncompressed_size: u64,
    pub name: Vec<u8>,
    pub external_attributes: u32,
    pub local_header_offset: u64,
    /// The modification time of the extended-timestamp field (0x5455), when
    /// the central directory carries one.
    pub extended_mtime: Option<i64>,
}

fn unreadable(what: impl Into<String>) -> IngestError {
    IngestError::Unreadable(what.into())
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(raw)
}

fn read_at(file: &File, offset: u64, buf: &mut [u8], what: &str) -> Result<(), IngestError> {
    file.read_exact_at(buf, offset)
        .map_err(|err| unreadable(format!("cannot read the {what} at offset {offset}: {err}")))
}

/// Finds and decodes the end-of-central-directory record (and its zip64
/// form), reading only the archive's tail.
pub(super) fn read_end_record(file: &File, file_len: u64) -> Result<EndRecord, IngestError> {
    if file_len < EOCD_LEN {
        return Err(unreadable(format!(
            "the file is {file_len} bytes, too short to be a zip archive"
        )));
    }
    let tail_len = file_len.min(EOCD_LEN + 0xFFFF);
    let tail_start = file_len - tail_len;
    let mut tail = vec![0u8; tail_len as usize];
    read_at(file, tail_start, &mut tail, "end of the archive")?;
    // The last signature whose comment length reaches exactly the end of the
    // file wins; failing that, the last signature at all.
    let mut found = None;
    let mut fallback = None;
    for at in (0..=tail.len() - EOCD_LEN as usize).rev() {
        if le32(&tail, at) == EOCD_SIG {
            let comment_len = le16(&tail, at + 20) as usize;
            if at + EOCD_LEN as usize + comment_len == tail.len() {
                found = Some(at);
                break;
            }
            fallback.get_or_insert(at);
        }
    }
    let at = found.or(fallback).ok_or_else(|| {
        unreadable(
            "no end-of-central-directory record: this is not a zip archive, or it is truncated",
        )
    })?;
    let eocd_pos = tail_start + at as u64;
    let record = &tail[at..at + EOCD_LEN as usize];
    let disk = le16(record, 4);
    let cd_disk = le16(record, 6);
    let entries_disk = le16(record, 8);
    let entries_total = le16(record, 10);
    let cd_size = le32(record, 12);
    let cd_offset = le32(record, 16);
    let needs_zip64 = entries_total == 0xFFFF
        || entries_disk == 0xFFFF
        || cd_size == u32::MAX
        || cd_offset == u32::MAX;
    let mut end = EndRecord {
        entries: u64::from(entries_total.max(entries_disk)),
        cd_offset: u64::from(cd_offset),
        cd_size: u64::from(cd_size),
    };
    let mut cd_end = eocd_pos;
    if needs_zip64 && eocd_pos >= 20 {
        let mut locator = [0u8; 20];
        read_at(file, eocd_pos - 20, &mut locator, "zip64 end locator")?;
        if le32(&locator, 0) == EOCD64_LOCATOR_SIG {
            let eocd64_pos = le64(&locator, 8);
            let mut eocd64 = [0u8; 56];
            if eocd64_pos.checked_add(56).is_none_or(|end| end > eocd_pos) {
                return Err(unreadable("the zip64 end record points outside the archive"));
            }
            read_at(file, eocd64_pos, &mut eocd64, "zip64 end record")?;
            if le32(&eocd64, 0) != EOCD64_SIG {
                return Err(unreadable(
                    "the zip64 end locator does not point at a zip64 end record",
                ));
            }
            end.entries = le64(&eocd64, 24).max(le64(&eocd64, 32));
            end.cd_size = le64(&eocd64, 40);
            end.cd_offset = le64(&eocd64, 48);
            cd_end = eocd64_pos;
        }
    } else if disk != 0 || cd_disk != 0 {
        return Err(unreadable("multi-disk archives are not supported"));
    }
    match end.cd_offset.checked_add(end.cd_size) {
        Some(stop) if stop == cd_end => Ok(end),
        _ => Err(unreadable(format!(
            "the central directory ({} bytes at offset {}) does not end where the end record is (offset {cd_end}); \
             the archive is truncated, corrupt or has data prepended",
            end.cd_size, end.cd_offset
        ))),
    }
}

/// Reads the central directory entries one at a time through a bounded
/// buffer, handing each to `visit` (which may refuse it) before the next is
/// read. Names longer than `max_name` are refused unread.
pub(super) fn read_central_directory(
    file: &File,
    end: &EndRecord,
    max_name: usize,
    mut visit: impl FnMut(RawEntry) -> Result<(), IngestError>,
) -> Result<(), IngestError> {
    let handle =
        file.try_clone().map_err(|err| unreadable(format!("cannot reopen the archive: {err}")))?;
    let mut reader = BufReader::with_capacity(64 << 10, handle);
    reader
        .seek(SeekFrom::Start(end.cd_offset))
        .map_err(|err| unreadable(format!("cannot seek to the central directory: {err}")))?;
    let mut reader = reader.take(end.cd_size);
    let mut fixed = [0u8; 46];
    let mut extra = Vec::new();
    for index in 0..end.entries {
        let short = |err: std::io::Error| {
            unreadable(format!("central directory entry {index} is truncated or unreadable: {err}"))
        };
        reader.read_exact(&mut fixed).map_err(short)?;
        if le32(&fixed, 0) != CENTRAL_SIG {
            return Err(unreadable(format!("central directory entry {index} has a bad signature")));
        }
        let name_len = usize::from(le16(&fixed, 28));
        let extra_len = usize::from(le16(&fixed, 30));
        let comment_len = u64::from(le16(&fixed, 32));
        let mut name = vec![0u8; name_len.min(max_name + 1)];
        reader.read_exact(&mut name).map_err(short)?;
        if name_len > max_name {
            return Err(IngestError::PathTooLong {
                entry: if name.len() < name_len {
                    format!("{} (truncated)", super::names::display_raw(&name))
                } else {
                    super::names::display_raw(&name)
                },
                bytes: name_len,
                limit: max_name,
            });
        }
        extra.resize(extra_len, 0);
        reader.read_exact(&mut extra).map_err(short)?;
        std::io::copy(&mut (&mut reader).take(comment_len), &mut std::io::sink()).map_err(short)?;

        let mut entry = RawEntry {
            made_by: le16(&fixed, 4),
            flags: le16(&fixed, 8),
            method: le16(&fixed, 10),
            dos_time: le16(&fixed, 12),
            dos_date: le16(&fixed, 14),
            compressed_size: u64::from(le32(&fixed, 20)),
            uncompressed_size: u64::from(le32(&fixed, 24)),
            name,
            external_attributes: le32(&fixed, 38),
            local_header_offset: u64::from(le32(&fixed, 42)),
            extended_mtime: None,
        };
        apply_extra_fields(&mut entry, &extra);
        visit(entry)?;
    }
    Ok(())
}

/// Applies the zip64 sizes and offset and the extended timestamp found in a
/// central extra-field block. Malformed fields are ignored, as other readers
/// do.
fn apply_extra_fields(entry: &mut RawEntry, extra: &[u8]) {
    let mut at = 0;
    while at + 4 <= extra.len() {
        let id = le16(extra, at);
        let len = usize::from(le16(extra, at + 2));
        let Some(body) = extra.get(at + 4..at + 4 + len) else { break };
        match id {
            0x0001 => {
                let mut cursor = 0;
                let mut next = |slot: &mut u64| {
                    if *slot == u64::from(u32::MAX) && cursor + 8 <= body.len() {
                        *slot = le64(body, cursor);
                        cursor += 8;
                    }
                };
                next(&mut entry.uncompressed_size);
                next(&mut entry.compressed_size);
                next(&mut entry.local_header_offset);
            }
            0x5455 if body.len() >= 5 && body[0] & 1 != 0 => {
                // Unsigned, as the zip crate writes it, so times past 2038 work.
                entry.extended_mtime = Some(i64::from(le32(body, 1)));
            }
            _ => {}
        }
        at += 4 + len;
    }
}

/// Reads an entry's local header and returns where its data starts.
pub(super) fn local_data_start(
    file: &File,
    entry: &RawEntry,
    entry_name: &str,
) -> Result<u64, IngestError> {
    let mut header = [0u8; LOCAL_HEADER_LEN as usize];
    file.read_exact_at(&mut header, entry.local_header_offset).map_err(|err| {
        unreadable(format!(
            "cannot read the local header of entry {entry_name} at offset {}: {err}",
            entry.local_header_offset
        ))
    })?;
    if le32(&header, 0) != LOCAL_SIG {
        return Err(unreadable(format!(
            "entry {entry_name} points at offset {} where there is no local file header",
            entry.local_header_offset
        )));
    }
    let variable = u64::from(le16(&header, 26)) + u64::from(le16(&header, 28));
    Ok(entry.local_header_offset + LOCAL_HEADER_LEN + variable)
}

/// Converts an MS-DOS date and time (read as UTC) to Unix seconds; `None`
/// for a date or time that does not exist (month 13, 31 February, 25:00).
pub(super) fn dos_to_unix(date: u16, time: u16) -> Option<i64> {
    let month = ::time::Month::try_from(((date >> 5) & 0xF) as u8).ok()?;
    let day =
        ::time::Date::from_calendar_date(i32::from(date >> 9) + 1980, month, (date & 0x1F) as u8)
            .ok()?;
    let at = ::time::Time::from_hms(
        (time >> 11) as u8,
        ((time >> 5) & 0x3F) as u8,
        ((time & 0x1F) * 2) as u8,
    )
    .ok()?;
    Some(::time::PrimitiveDateTime::new(day, at).assume_utc().unix_timestamp())
}

#[cfg(test)]
mod tests {
    use super::dos_to_unix;

    /// An MS-DOS date and time from their parts.
    fn dos(year: u16, month: u16, day: u16, h: u16, m: u16, s: u16) -> (u16, u16) {
        (((year - 1980) << 9) | (month << 5) | day, (h << 11) | (m << 5) | (s / 2))
    }

    fn check((date, time): (u16, u16), expect: Option<i64>) {
        assert_eq!(dos_to_unix(date, time), expect, "date {date:#06x} time {time:#06x}");
    }

    #[test]
    fn dos_times_that_exist_and_that_do_not() {
        check(dos(1980, 1, 1, 0, 0, 0), Some(315_532_800));
        check(dos(2026, 1, 5, 9, 0, 0), Some(1_767_603_600));
        check(dos(2024, 2, 29, 23, 59, 58), Some(1_709_251_198));
        // Month 0 and 13, day 0, 31 February, 29 February of a common year.
        check(dos(2026, 0, 1, 0, 0, 0), None);
        check(dos(2026, 13, 1, 0, 0, 0), None);
        check(dos(2026, 1, 0, 0, 0, 0), None);
        check(dos(2026, 2, 31, 0, 0, 0), None);
        check(dos(2025, 2, 29, 0, 0, 0), None);
        // 24:00, minute 60, second 60 (stored as 30 two-second units).
        check(dos(2026, 1, 5, 24, 0, 0), None);
        check(dos(2026, 1, 5, 9, 60, 0), None);
        check(dos(2026, 1, 5, 9, 0, 60), None);
    }
}
