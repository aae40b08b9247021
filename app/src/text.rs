//! Text helpers shared by the pages and the server's other HTML and XML
//! writers (the invite email, the SVG charts).

/// Escapes text for HTML or XML content and attribute values (`&`, `<`,
/// `>`, `"`, `'`).
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_every_markup_character_and_nothing_else() {
        assert_eq!(
            super::escape_html(r#"<a href="x">Tom & 'Jerry'</a> é"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt; é"
        );
        assert_eq!(super::escape_html("plain"), "plain");
    }
}
