//! Ingestion benchmark part: `rows()` builds a ~50 MB, 5,000-file zip once
//! and compares the median wall time of `grader::ingest::ingest` with that of
//! `unzip -q` on the same archive. It has no `main`; a bench binary includes
//! it with `#[path]`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use grader::ingest::{IngestLimits, ingest};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

const FILES: usize = 5_000;
const RUNS: usize = 5;

/// Returns `(label, ingest_ms, unzip_ms)` for the archive on the disk's
/// temporary directory and, where `/dev/shm` exists, on tmpfs (which removes
/// the filesystem's inode-allocation cost and shows the CPU side). `unzip_ms`
/// is NaN when `unzip` is not installed (a note is printed).
pub fn rows() -> Vec<(String, f64, f64)> {
    let mut rows = Vec::new();
    let disk = std::env::temp_dir();
    rows.extend(measure(&disk, "disk"));
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        rows.extend(measure(shm, "tmpfs"));
    }
    rows
}

fn measure(base: &Path, where_: &str) -> Option<(String, f64, f64)> {
    let tmp = match tempfile::tempdir_in(base) {
        Ok(tmp) => tmp,
        Err(err) => {
            eprintln!("ingest benchmark ({where_}) skipped: no temporary directory: {err}");
            return None;
        }
    };
    let zip_path = tmp.path().join("bench.zip");
    if let Err(err) = build_archive(&zip_path) {
        eprintln!("ingest benchmark ({where_}) skipped: cannot build the archive: {err}");
        return None;
    }
    let size_mb = std::fs::metadata(&zip_path).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
    let limits = IngestLimits::default();

    let mut run_index = 0usize;
    let mut fresh = |prefix: &str| -> PathBuf {
        run_index += 1;
        tmp.path().join(format!("{prefix}-{run_index}"))
    };

    // Runs alternate between the two tools so that neither pays more for
    // the filesystem's aftermath of earlier runs (ext4 scans recently freed
    // inodes on allocation).
    let unzip_available =
        Command::new("unzip").arg("-v").output().is_ok_and(|out| out.status.success());
    if !unzip_available {
        eprintln!(
            "ingest benchmark: `unzip` is not installed, so there is no baseline (apt-get install unzip)"
        );
    }
    let mut ingest_times = Vec::new();
    let mut unzip_times = Vec::new();
    for _ in 0..RUNS {
        let dest = fresh("ingest");
        let started = Instant::now();
        let result = ingest(&zip_path, &dest, &limits);
        ingest_times.push(started.elapsed().as_secs_f64() * 1e3);
        if let Err(err) = result {
            eprintln!("ingest benchmark ({where_}): ingestion failed: {err}");
            return None;
        }
        let _ = std::fs::remove_dir_all(&dest);

        if unzip_available {
            let dest = fresh("unzip");
            let started = Instant::now();
            let status =
                Command::new("unzip").arg("-q").arg(&zip_path).arg("-d").arg(&dest).status();
            unzip_times.push(started.elapsed().as_secs_f64() * 1e3);
            if !status.is_ok_and(|s| s.success()) {
                eprintln!("ingest benchmark ({where_}): unzip failed");
                return None;
            }
            let _ = std::fs::remove_dir_all(&dest);
        }
    }

    let label = format!("ingest {FILES} files, {size_mb:.0} MB zip, {where_} (median of {RUNS})");
    Some((label, median(&mut ingest_times), median(&mut unzip_times)))
}

fn median(times: &mut [f64]) -> f64 {
    if times.is_empty() {
        return f64::NAN;
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Writes the benchmark archive: a third of the files are compressible
/// source-like text, the rest incompressible bytes, spread over nested
/// folders, averaging about 14 KB each (about 50 MB compressed).
fn build_archive(path: &Path) -> std::io::Result<()> {
    let file = std::fs::File::create(path)?;
    let mut zip = ZipWriter::new(std::io::BufWriter::new(file));
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut data = Vec::with_capacity(64 << 10);
    for i in 0..FILES {
        data.clear();
        let len = 4_000 + (next() % 20_000) as usize;
        if i % 3 == 0 {
            while data.len() < len {
                let n = next();
                let _ = writeln!(
                    data,
                    "    let value_{} = compute({}, \"{:x}\");",
                    n % 97,
                    n % 1000,
                    n % 4096
                );
            }
            data.truncate(len);
        } else {
            while data.len() < len {
                data.extend_from_slice(&next().to_le_bytes());
            }
            data.truncate(len);
        }
        let name = format!(
            "module{:02}/part{}/sub{}/file{i:05}.{}",
            i % 23,
            i % 5,
            i % 3,
            if i % 3 == 0 { "rs" } else { "bin" }
        );
        zip.start_file(name, options).map_err(std::io::Error::other)?;
        zip.write_all(&data)?;
    }
    zip.finish().map_err(std::io::Error::other)?.flush()
}
