//! How people really zip (issue #16): the same files, zipped each way, ingest to the same tree.

use std::collections::BTreeMap;
use std::path::Path;

use grader::ingest::{
    IngestLimits, IngestOptions, Ingested, NORMALISED_LISTED, ingest_with, write_zip_from_dir,
};

use super::*;

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
