//! Path rules: traversal, absolute paths, bad components and characters, length and depth.

use grader::ingest::IngestLimits;

use super::*;

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
