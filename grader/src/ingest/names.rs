//! Entry-name decoding, validation and the keys used to detect colliding
//! names.

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization;

use super::IngestError;

/// The upper half of IBM code page 437, which zip readers use for names whose
/// UTF-8 flag is not set.
const CP437_HIGH: &str = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u{a0}";

/// Renders raw name bytes for an error message, escaping anything unusual so
/// that control characters and invalid bytes are visible.
pub(super) fn display_raw(raw: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in raw.utf8_chunks() {
        out.extend(chunk.valid().chars().flat_map(char::escape_debug));
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out.push('"');
    out
}

/// Decodes an entry name: names flagged UTF-8 must be valid UTF-8, others are
/// read as CP437 (which maps every byte, so they always decode).
pub(super) fn decode_name(raw: &[u8], utf8_flag: bool) -> Result<String, IngestError> {
    if utf8_flag || raw.is_ascii() {
        return match std::str::from_utf8(raw) {
            Ok(name) => Ok(name.to_owned()),
            Err(err) => Err(IngestError::InvalidUtf8Name {
                entry: display_raw(raw),
                detail: err.to_string(),
            }),
        };
    }
    let high: Vec<char> = CP437_HIGH.chars().collect();
    Ok(raw
        .iter()
        .map(|&b| if b < 0x80 { char::from(b) } else { high[usize::from(b - 0x80)] })
        .collect())
}

/// The validated shape of an entry name.
#[derive(Debug, Clone)]
pub(super) struct CheckedName {
    /// The path without a trailing slash, components joined by `/`.
    pub path: String,
    /// Whether the name ended with `/`, which marks a directory.
    pub trailing_slash: bool,
    /// Whether the archive wrote `\` as the separator (converted to `/`).
    pub backslashes: bool,
}

/// Applies every path rule to a decoded name, in an order that reports the
/// most specific rule first.
pub(super) fn check_name(
    name: &str,
    max_path_bytes: usize,
    max_path_depth: usize,
) -> Result<CheckedName, IngestError> {
    // Windows PowerShell 5.1's `Compress-Archive` writes `\` between the
    // components of nested entries. Like Info-ZIP's unzip, read it as `/`,
    // then hold the converted name to every rule below, so that `..\..\x`,
    // `\x` and `C:\x` are still refused.
    let converted: Cow<'_, str> =
        if name.contains('\\') { Cow::Owned(name.replace('\\', "/")) } else { Cow::Borrowed(name) };
    let backslashes = matches!(converted, Cow::Owned(_));
    let name_raw = name;
    let name: &str = &converted;
    let entry = || format!("{name_raw:?}");
    if name.len() > max_path_bytes {
        return Err(IngestError::PathTooLong {
            entry: entry(),
            bytes: name.len(),
            limit: max_path_bytes,
        });
    }
    if name.chars().any(char::is_control) {
        return Err(IngestError::ControlCharacter { entry: entry() });
    }
    if name.starts_with('/') {
        return Err(IngestError::AbsolutePath { entry: entry() });
    }
    let bytes = name.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(IngestError::DriveLetter { entry: entry() });
    }
    let trailing_slash = name.ends_with('/');
    let body = name.strip_suffix('/').unwrap_or(name);
    let mut depth = 0usize;
    for component in body.split('/') {
        match component {
            ".." => return Err(IngestError::PathTraversal { entry: entry() }),
            "" | "." => return Err(IngestError::EmptyComponent { entry: entry() }),
            _ => depth += 1,
        }
    }
    if depth > max_path_depth {
        return Err(IngestError::PathTooDeep { entry: entry(), depth, limit: max_path_depth });
    }
    Ok(CheckedName { path: body.to_owned(), trailing_slash, backslashes })
}

/// The key under which two names count as the same file: Unicode lowercase,
/// then canonical decomposition (NFD), so `A.txt`/`a.txt` and a composed `é`
/// and `e` + combining acute collide.
pub(super) fn collision_key(path: &str) -> String {
    let lower: Cow<'_, str> = if path.chars().any(|c| !c.is_ascii() || c.is_ascii_uppercase()) {
        Cow::Owned(path.to_lowercase())
    } else {
        Cow::Borrowed(path)
    };
    if lower.is_ascii() {
        return lower.into_owned();
    }
    // Canonical decomposition with canonical ordering of combining marks.
    lower.nfd().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfd_and_case_fold_together() {
        assert_eq!(collision_key("Caf\u{e9}"), collision_key("cafe\u{301}"));
        assert_eq!(collision_key("\u{ac00}"), "\u{1100}\u{1161}");
        assert_ne!(collision_key("a"), collision_key("b"));
        // Combining marks in either order (canonical ordering), a Hangul
        // syllable with a final consonant, a decomposition of a
        // decomposition (U+1E69: s, dot below, dot above).
        assert_eq!(collision_key("a\u{301}\u{323}"), collision_key("a\u{323}\u{301}"));
        assert_eq!(collision_key("\u{ac01}"), "\u{1100}\u{1161}\u{11a8}");
        assert_eq!(collision_key("\u{1e69}"), "s\u{323}\u{307}");
        assert_eq!(collision_key("\u{1e68}"), collision_key("s\u{307}\u{323}"));
        // Compatibility forms are not canonical equivalents: kept apart.
        assert_ne!(collision_key("\u{fb01}"), collision_key("fi"));
    }

    #[test]
    fn cp437_maps_high_bytes() {
        assert_eq!(decode_name(b"caf\x82", false).unwrap(), "caf\u{e9}");
        assert_eq!(CP437_HIGH.chars().count(), 128);
    }
}
