//! Writing submissions: the deterministic zip of a folder the grader and
//! its tests make.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

/// Writes a deterministic zip of every file and directory under `dir`:
/// sorted entries, deflate, fixed permissions (0644, or 0755 for executables
/// and directories), and modification times from `times` (keyed by relative
/// `/`-separated path) or `default_time`, stored both as a DOS time (UTC) and
/// as an extended-timestamp field. Symbolic links are refused.
pub fn write_zip_from_dir(
    dir: &Path,
    out: &Path,
    times: &BTreeMap<String, i64>,
    default_time: i64,
) -> io::Result<()> {
    let mut entries: Vec<(String, bool, bool)> = Vec::new();
    for item in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let item = item.map_err(io::Error::other)?;
        let rel = item
            .path()
            .strip_prefix(dir)
            .map_err(io::Error::other)?
            .to_str()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not UTF-8", item.path().display()),
                )
            })?
            .replace(std::path::MAIN_SEPARATOR, "/");
        let kind = item.file_type();
        if kind.is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("refusing to zip the symlink {rel}"),
            ));
        }
        let executable = kind.is_file()
            && item.metadata().map_err(io::Error::other)?.permissions().mode() & 0o111 != 0;
        entries.push((rel, kind.is_dir(), executable));
    }
    entries.sort();

    let output = File::create(out)?;
    let mut writer = ZipWriter::new(io::BufWriter::new(output));
    let to_io = |err: zip::result::ZipError| io::Error::other(err);
    for (rel, is_dir, executable) in entries {
        let time = times.get(&rel).copied().unwrap_or(default_time);
        let mode = if is_dir || executable { 0o755 } else { 0o644 };
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .unix_permissions(mode)
            .last_modified_time(dos_time(time))
            .with_extended_timestamp(u32::try_from(time).ok(), None, None)
            .map_err(to_io)?;
        if is_dir {
            writer.add_directory(format!("{rel}/"), options).map_err(to_io)?;
        } else {
            writer.start_file(rel.as_str(), options).map_err(to_io)?;
            let mut source = File::open(dir.join(&rel))?;
            io::copy(&mut source, &mut writer)?;
        }
    }
    let mut inner = writer.finish().map_err(to_io)?;
    inner.flush()?;
    Ok(())
}

/// Unix seconds to a DOS date and time in UTC, clamped to the range DOS
/// times can hold (1980 to 2107).
fn dos_time(unix: i64) -> zip::DateTime {
    let (low, high) = (
        zip::DateTime::from_date_and_time(1980, 1, 1, 0, 0, 0),
        zip::DateTime::from_date_and_time(2107, 12, 31, 23, 59, 58),
    );
    let clamped = match ::time::OffsetDateTime::from_unix_timestamp(unix) {
        Ok(t) if t.year() < 1980 => low,
        Ok(t) if t.year() <= 2107 => zip::DateTime::from_date_and_time(
            t.year() as u16,
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
        ),
        Ok(_) => high,
        Err(_) if unix < 0 => low,
        Err(_) => high,
    };
    clamped.unwrap_or_default()
}
