//! Text that came from outside, made fit for a terminal: every control
//! character shown as an escape, and anything long cut to a readable
//! prefix.
//!
//! ```text
//! "web\n\x1b[31mFAKE"   ─► web\n\x1b[31mFAKE           (one line, no colour)
//! 70 000 × "a"          ─► aaaa…aaaa…(69800 more bytes)
//! "\u{202e}evil"        ─► \u{202e}evil                 (no reordering)
//! ```
//!
//! A management server chooses its resource names, versions and error
//! messages; a user types names and file paths. None of it may start a new
//! line, move the cursor, change colours or reverse the reading order on
//! the terminal, and none may be so long that it buries the output or
//! overflows a formatter's width. The backslash itself is escaped (`\\`),
//! so an escape on screen always means the character it names. JSON output
//! does not use this module: serde escapes strings exactly.

/// How many characters of one piece of outside text a line shows before
/// cutting it: enough for any real xDS name, well under a screenful.
pub const SHOWN_CHARS: usize = 200;

/// How many characters of a message (an error, a resource's summary) a
/// line shows: messages quote names, and may list several problems.
pub const MESSAGE_CHARS: usize = 1_000;

/// A message escaped and cut after [`MESSAGE_CHARS`] characters.
pub fn message(text: &str) -> String {
    shown_within(text, MESSAGE_CHARS)
}

/// `text` escaped (see [`escape`]) and cut after [`SHOWN_CHARS`] characters
/// of output, ending with `…(N more bytes)`, N counted in `text`.
pub fn shown(text: &str) -> String {
    shown_within(text, SHOWN_CHARS)
}

/// [`shown`] with another limit on the characters shown.
pub fn shown_within(text: &str, limit: usize) -> String {
    let mut out = String::with_capacity(text.len().min(limit) + 8);
    let mut count = 0usize;
    for (at, c) in text.char_indices() {
        let before = out.len();
        push_escaped(&mut out, c);
        count += out[before..].chars().count();
        if count > limit {
            out.truncate(before);
            let rest = text.len() - at;
            out.push_str(&format!("…({rest} more bytes)"));
            return out;
        }
    }
    out
}

/// `text` with every character that could act on a terminal written as
/// an escape: `\n`, `\r`, `\t`, `\\`, `\x1b` for other ASCII controls,
/// `\u{85}` for the rest (C1 controls, bidirectional overrides and
/// isolates, line and paragraph separators, zero-width characters, the
/// byte order mark). Nothing is cut.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\\' => out.push_str("\\\\"),
        c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
        c if c.is_control() || is_invisible_format(c) => {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
        c => out.push(c),
    }
}

/// Format characters that change how the rest of a line is shown or hide
/// themselves: bidirectional marks, embeddings, overrides and isolates
/// (the "Trojan Source" characters), line and paragraph separators,
/// zero-width spaces and joiners, and the byte order mark.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}'
    )
}

/// `text` followed by spaces up to `width` characters; never panics,
/// whatever the width (a formatter's `{:<width$}` does past 65 535).
pub fn pad(text: &str, width: usize) -> String {
    let len = text.chars().count();
    let mut out = String::with_capacity(text.len() + width.saturating_sub(len));
    out.push_str(text);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(len)));
    out
}

/// Whether `text` holds anything [`escape`] would rewrite, other than
/// backslashes: what a test asserts never reaches a terminal.
pub fn has_terminal_controls(text: &str) -> bool {
    text.chars()
        .any(|c| c != '\\' && c != '\n' && (c.is_control() || is_invisible_format(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_as_escapes() {
        assert_eq!(escape("web\n\x1b[31mX"), "web\\n\\x1b[31mX");
        assert_eq!(escape("a\tb\rc\u{7f}"), "a\\tb\\rc\\x7f");
        assert_eq!(escape("\u{85}\u{9b}"), "\\u{85}\\u{9b}");
        assert_eq!(escape("x\u{202e}y\u{2066}z"), "x\\u{202e}y\\u{2066}z");
        assert_eq!(escape("a\u{2028}b\u{feff}"), "a\\u{2028}b\\u{feff}");
        assert_eq!(escape("c:\\n"), "c:\\\\n");
        assert_eq!(escape("cloud.example/é/日本"), "cloud.example/é/日本");
    }

    #[test]
    fn long_text_keeps_a_prefix_and_counts_the_rest() {
        let long = "a".repeat(70_000);
        let shown = shown(&long);
        assert_eq!(
            shown,
            format!("{}…(69800 more bytes)", "a".repeat(SHOWN_CHARS))
        );
        assert_eq!(shown_within("abc", 3), "abc");
        assert_eq!(shown_within("abcd", 3), "abc…(1 more bytes)");
        // An escape is never cut in half.
        assert_eq!(shown_within("ab\x1b", 4), "ab…(1 more bytes)");
        assert_eq!(shown_within("ééé", 2), "éé…(2 more bytes)");
    }

    #[test]
    fn padding_never_panics() {
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(pad("abc", 1), "abc");
        assert_eq!(pad("", 70_000).len(), 70_000);
    }

    #[test]
    fn escaped_text_has_no_terminal_controls() {
        let hostile = "a\nb\x1b[2J\u{9b}\u{202e}\u{2029}\u{200b}";
        assert!(has_terminal_controls(hostile));
        assert!(!has_terminal_controls(&escape(hostile)));
    }
}
