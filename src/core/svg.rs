//! Text placed in the SVG figures the reports write (the composer's plots, `holmes evaluate
//! --report`): escaped so a name or title holding `&`, `<`, `>` or `"` cannot break the file.

/// `s` escaped for SVG text content and attribute values.
pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(escape(r#"a<b & "c">"#), "a&lt;b &amp; &quot;c&quot;&gt;");
        assert_eq!(escape("plain"), "plain");
    }
}
