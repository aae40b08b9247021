//! Entry types and encryption, and names that collide.

use super::*;

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
