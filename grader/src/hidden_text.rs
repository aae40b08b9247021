//! Characters a reviewer cannot see: Unicode bidirectional controls and
//! invisible characters in the submitted text files (Trojan Source,
//! CVE-2021-42574). Each is listed with its file, line, column and code
//! point, as GitHub warns about them; a direction control in a file that
//! runs or configures a run (anything but prose: Markdown, plain text,
//! CSV) can make a line of code read otherwise than it runs, as rustc's
//! `text_direction_codepoint_in_literal`/`_in_comment` lints refuse, and
//! is `evidence-tampering`. Direction marks (LRM, RLM, ALM), which
//! right-to-left text uses, and invisible characters are only shown; a
//! byte-order mark at the very start of a file is ordinary and not listed.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One character a reviewer cannot see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HiddenChar {
    pub file: String,
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// `U+202E`.
    pub code_point: String,
    /// `RIGHT-TO-LEFT OVERRIDE`.
    pub name: String,
    /// A direction control in a file that runs: the line may read otherwise
    /// than it runs.
    pub reorders: bool,
}

impl HiddenChar {
    pub fn describe(&self) -> String {
        format!(
            "{}:{}:{}: {} {}{}",
            self.file,
            self.line,
            self.column,
            self.code_point,
            self.name,
            if self.reorders { " (can make the line read otherwise than it runs)" } else { "" }
        )
    }
}

/// At most this many are listed per submission (the rest are counted).
pub const MAX_LISTED: usize = 200;
/// Files larger than this are not read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The name of `c` when it is a direction control (`true`) or an invisible
/// character (`false`).
pub fn classify(c: char) -> Option<(&'static str, bool)> {
    Some(match c {
        '\u{202A}' => ("LEFT-TO-RIGHT EMBEDDING", true),
        '\u{202B}' => ("RIGHT-TO-LEFT EMBEDDING", true),
        '\u{202C}' => ("POP DIRECTIONAL FORMATTING", true),
        '\u{202D}' => ("LEFT-TO-RIGHT OVERRIDE", true),
        '\u{202E}' => ("RIGHT-TO-LEFT OVERRIDE", true),
        '\u{2066}' => ("LEFT-TO-RIGHT ISOLATE", true),
        '\u{2067}' => ("RIGHT-TO-LEFT ISOLATE", true),
        '\u{2068}' => ("FIRST STRONG ISOLATE", true),
        '\u{2069}' => ("POP DIRECTIONAL ISOLATE", true),
        '\u{200E}' => ("LEFT-TO-RIGHT MARK", false),
        '\u{200F}' => ("RIGHT-TO-LEFT MARK", false),
        '\u{061C}' => ("ARABIC LETTER MARK", false),
        '\u{200B}' => ("ZERO WIDTH SPACE", false),
        '\u{200C}' => ("ZERO WIDTH NON-JOINER", false),
        '\u{200D}' => ("ZERO WIDTH JOINER", false),
        '\u{2060}' => ("WORD JOINER", false),
        '\u{2061}'..='\u{2064}' => ("INVISIBLE OPERATOR", false),
        '\u{FEFF}' => ("ZERO WIDTH NO-BREAK SPACE (byte-order mark)", false),
        '\u{00AD}' => ("SOFT HYPHEN", false),
        '\u{034F}' => ("COMBINING GRAPHEME JOINER", false),
        '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' => ("HANGUL FILLER", false),
        '\u{180E}' => ("MONGOLIAN VOWEL SEPARATOR", false),
        '\u{FFF9}'..='\u{FFFB}' => ("INTERLINEAR ANNOTATION", false),
        '\u{E0000}'..='\u{E007F}' => ("TAG CHARACTER", false),
        _ => return None,
    })
}

/// Whether `path` is prose (read by people, never run).
pub fn is_prose(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let ext = lower.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    matches!(ext, "md" | "markdown" | "txt" | "rst" | "adoc" | "csv" | "tsv" | "log")
}

/// The hidden characters of one file's text.
pub fn scan_text(file: &str, text: &str, out: &mut Vec<HiddenChar>, more: &mut usize) {
    let prose = is_prose(file);
    for (n, line) in text.lines().enumerate() {
        for (col, c) in line.chars().enumerate() {
            if n == 0 && col == 0 && c == '\u{FEFF}' {
                continue;
            }
            if let Some((name, direction)) = classify(c) {
                if out.len() >= MAX_LISTED {
                    *more += 1;
                    continue;
                }
                out.push(HiddenChar {
                    file: file.to_string(),
                    line: n + 1,
                    column: col + 1,
                    code_point: format!("U+{:04X}", c as u32),
                    name: name.to_string(),
                    reorders: direction && !prose,
                });
            }
        }
    }
}

/// The hidden characters of the files `paths` (relative to `root`) that
/// are UTF-8 text; and how many more there were than [`MAX_LISTED`].
pub fn scan(root: &Path, paths: impl IntoIterator<Item = String>) -> (Vec<HiddenChar>, usize) {
    let mut out = Vec::new();
    let mut more = 0;
    for path in paths {
        let full = root.join(&path);
        let Ok(meta) = std::fs::symlink_metadata(&full) else { continue };
        if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
            continue;
        }
        let Ok(bytes) = std::fs::read(&full) else { continue };
        if let Ok(text) = std::str::from_utf8(&bytes) {
            scan_text(&path, text, &mut out, &mut more);
        }
    }
    (out, more)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(file: &str, text: &str, expect: &[&str]) {
        let mut out = Vec::new();
        let mut more = 0;
        scan_text(file, text, &mut out, &mut more);
        let got: Vec<String> = out.iter().map(|h| h.describe()).collect();
        assert_eq!(got, expect, "{file}");
    }

    #[test]
    fn direction_controls_in_code_reorder_and_in_prose_are_shown() {
        // The Trojan Source "commenting out" example: the override hides
        // the early return inside what reads as a comment.
        check(
            "bucket.py",
            "def allow(self):\n    return True  # \u{202E} } \u{2066}if admin:\u{2069} \u{2066} \n",
            &[
                "bucket.py:2:20: U+202E RIGHT-TO-LEFT OVERRIDE (can make the line read otherwise than it runs)",
                "bucket.py:2:24: U+2066 LEFT-TO-RIGHT ISOLATE (can make the line read otherwise than it runs)",
                "bucket.py:2:34: U+2069 POP DIRECTIONAL ISOLATE (can make the line read otherwise than it runs)",
                "bucket.py:2:36: U+2066 LEFT-TO-RIGHT ISOLATE (can make the line read otherwise than it runs)",
            ],
        );
        check(
            "NOTES.md",
            "a \u{202B}b\u{202C}\n",
            &[
                "NOTES.md:1:3: U+202B RIGHT-TO-LEFT EMBEDDING",
                "NOTES.md:1:5: U+202C POP DIRECTIONAL FORMATTING",
            ],
        );
    }

    #[test]
    fn invisible_characters_are_shown_and_ordinary_text_is_quiet() {
        check(
            "a.py",
            "x\u{200B}y = 1\nname = \"\u{05E9}\u{05DC}\u{05D5}\u{05DD}\u{200F}\"\n",
            &["a.py:1:2: U+200B ZERO WIDTH SPACE", "a.py:2:13: U+200F RIGHT-TO-LEFT MARK"],
        );
        // Right-to-left letters, accents, emoji and a leading BOM: nothing.
        check("b.py", "\u{FEFF}# שלום עולם, مرحبا, café, 👍🏽\nprint('ok')\n", &[]);
        assert!(is_prose("NOTES.md") && is_prose("data/x.CSV") && !is_prose("patch.diff"));
    }
}
