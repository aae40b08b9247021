//! Looks inside an extracted archive for archives within it, without
//! extracting it, up to the nesting limit.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use zip::ZipArchive;

use super::{IngestError, IngestLimits, ZIP_MAGIC, directory, names};

/// Inspects the archive at `path` (itself at nesting `depth`), refusing any
/// archive inside it that would exceed `limits.max_nesting`.
pub(super) fn inspect(
    path: &Path,
    outer: &str,
    depth: usize,
    dest: &Path,
    limits: &IngestLimits,
) -> Result<(), IngestError> {
    let file = File::open(path).map_err(|err| IngestError::NestedUnreadable {
        entry: outer.to_owned(),
        detail: err.to_string(),
    })?;
    inspect_file(file, outer, depth, dest, limits)
}

fn inspect_file(
    file: File,
    outer: &str,
    depth: usize,
    dest: &Path,
    limits: &IngestLimits,
) -> Result<(), IngestError> {
    let unreadable =
        |detail: String| IngestError::NestedUnreadable { entry: outer.to_owned(), detail };
    let file_len = file.metadata().map_err(|err| unreadable(err.to_string()))?.len();
    let end =
        directory::read_end_record(&file, file_len).map_err(|err| unreadable(err.to_string()))?;
    if end.entries > limits.max_entries as u64 {
        return Err(unreadable(format!(
            "it declares {} entries, more than the limit of {}",
            end.entries, limits.max_entries
        )));
    }
    // The names, and whether each entry could hold data worth looking at.
    let mut inner: Vec<(String, bool)> = Vec::new();
    directory::read_central_directory(&file, &end, usize::from(u16::MAX), |raw| {
        let name = names::display_raw(&raw.name);
        let readable =
            !raw.name.ends_with(b"/") && raw.flags & 0x41 == 0 && matches!(raw.method, 0 | 8);
        inner.push((name, readable));
        Ok(())
    })
    .map_err(|err| unreadable(err.to_string()))?;

    let handle = file.try_clone().map_err(|err| unreadable(err.to_string()))?;
    let mut archive =
        ZipArchive::new(BufReader::new(handle)).map_err(|err| unreadable(err.to_string()))?;
    if archive.len() != inner.len() {
        return Err(unreadable("it has duplicate entry names".into()));
    }
    for (index, (name, readable)) in inner.iter().enumerate() {
        if !readable {
            continue;
        }
        let label = format!("{outer} -> {name}");
        let mut entry =
            archive.by_index(index).map_err(|err| unreadable(format!("entry {name}: {err}")))?;
        let mut head = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match entry.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(unreadable(format!("entry {name}: {err}"))),
            }
        }
        if got < 4 || head != ZIP_MAGIC {
            continue;
        }
        if depth + 1 > limits.max_nesting {
            return Err(IngestError::NestingTooDeep {
                entry: label,
                depth: depth + 1,
                limit: limits.max_nesting,
            });
        }
        // Deeper levels need a seekable copy: an unnamed temporary file in
        // the destination, bounded by the per-entry limit.
        let mut copy = tempfile::tempfile_in(dest)
            .map_err(|err| IngestError::Io { path: dest.display().to_string(), source: err })?;
        io::Write::write_all(&mut copy, &head).map_err(|err| unreadable(err.to_string()))?;
        let copied = io::copy(&mut (&mut entry).take(limits.max_entry_bytes), &mut copy)
            .map_err(|err| unreadable(format!("entry {name}: {err}")))?;
        if copied + 4 > limits.max_entry_bytes {
            return Err(IngestError::EntryTooLarge { entry: label, limit: limits.max_entry_bytes });
        }
        drop(entry);
        inspect_file(copy, &label, depth + 1, dest, limits)?;
    }
    Ok(())
}
