//! A bound on how deeply a scenario nests flow collections (`[…]`, `{…}`),
//! checked before the YAML parser sees the text.
//!
//! The parser's work per token grows with the flow nesting depth, so a file
//! of a hundred thousand unclosed `[` takes quadratic time; the
//! deserializer would refuse anything nested deeper than 128 levels anyway,
//! but only after the parser had gone through all of it. This scan is
//! linear and deliberately approximate: it skips comments, quoted scalars and
//! block scalars, counts `[` and `{` everywhere in flow context and, in block
//! context, only where a node starts. Brackets inside plain scalars of block
//! context (`name: a[1`) therefore do not count.

/// The deepest flow nesting accepted: the YAML deserializer's own recursion
/// limit, so no file it would accept is refused here.
pub(crate) const MAX_DEPTH: usize = 128;

/// Where the nesting first got deeper than [`MAX_DEPTH`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooDeep {
    /// 1-based line.
    pub(crate) line: usize,
    /// 1-based column, in characters.
    pub(crate) column: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    Single,
    Double,
}

/// The scanner's state across lines.
#[derive(Debug, Default)]
struct Scan {
    depth: usize,
    quote: Option<Quote>,
    /// Inside a block scalar whose header was on a line of this indentation.
    block_scalar: Option<usize>,
}

/// Checks that `text` nests flow collections at most [`MAX_DEPTH`] deep.
pub(crate) fn check(text: &str) -> Result<(), TooDeep> {
    let mut scan = Scan::default();
    for (index, line) in text.lines().enumerate() {
        scan.line(line, index + 1)?;
    }
    Ok(())
}

impl Scan {
    fn line(&mut self, line: &str, number: usize) -> Result<(), TooDeep> {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if let Some(parent) = self.block_scalar {
            if line.trim().is_empty() || indent > parent {
                return Ok(());
            }
            self.block_scalar = None;
        }
        // The character before the current one, `None` at the line's start.
        let mut previous: Option<char> = None;
        let mut chars = line.chars().enumerate().peekable();
        while let Some((column, c)) = chars.next() {
            match self.quote {
                Some(Quote::Single) => {
                    if c == '\'' {
                        // `''` is an escaped quote inside a single-quoted scalar.
                        if chars.peek().is_some_and(|&(_, next)| next == '\'') {
                            chars.next();
                        } else {
                            self.quote = None;
                        }
                    }
                }
                Some(Quote::Double) => match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => self.quote = None,
                    _ => {}
                },
                None => {
                    let starts_node = self.starts_node(previous);
                    match c {
                        '#' if previous.is_none_or(char::is_whitespace) => return Ok(()),
                        '\'' if starts_node => self.quote = Some(Quote::Single),
                        '"' if starts_node => self.quote = Some(Quote::Double),
                        '|' | '>' if starts_node && self.depth == 0 => {
                            self.block_scalar = Some(indent);
                            return Ok(());
                        }
                        '[' | '{' if starts_node || self.depth > 0 => {
                            self.depth += 1;
                            if self.depth > MAX_DEPTH {
                                return Err(TooDeep {
                                    line: number,
                                    column: column + 1,
                                });
                            }
                        }
                        ']' | '}' => self.depth = self.depth.saturating_sub(1),
                        _ => {}
                    }
                }
            }
            previous = Some(c);
        }
        Ok(())
    }

    /// Whether a node may start after `previous`: at the line's start, after
    /// white space, and in flow context after an indicator.
    fn starts_node(&self, previous: Option<char>) -> bool {
        match previous {
            None => true,
            Some(p) if p.is_whitespace() => true,
            Some(p) => self.depth > 0 && matches!(p, '[' | '{' | ',' | ':'),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shallow_flow_collections_pass() {
        assert_eq!(check("a: [1, {b: [2, 3]}, [[4]]]\n"), Ok(()));
        assert_eq!(check(&"[".repeat(MAX_DEPTH)), Ok(()));
    }

    #[test]
    fn one_level_too_deep_is_refused_where_it_happens() {
        let text = format!("a: 1\nb: {}", "[".repeat(MAX_DEPTH + 1));
        assert_eq!(
            check(&text),
            Err(TooDeep {
                line: 2,
                column: 4 + MAX_DEPTH
            })
        );
    }

    #[test]
    fn closed_collections_do_not_add_up() {
        let text = "- [[[]]]\n".repeat(10 * MAX_DEPTH);
        assert_eq!(check(&text), Ok(()));
    }

    #[test]
    fn brackets_in_comments_quotes_plain_and_block_scalars_do_not_count() {
        let deep = "[".repeat(MAX_DEPTH + 1);
        let text = format!(
            "# {deep}\n\
             a: '{deep}' # {deep}\n\
             b: \"{deep}\\\" {deep}\"\n\
             c: it's{deep}\n\
             d: x{deep}\n\
             e: |\n  {deep}\n\n  {deep}\n\
             f: [ '{deep}', \"{deep}\", 'it''s {deep}' ]\n\
             g: >-\n    {deep}\n"
        );
        assert_eq!(check(&text), Ok(()));
    }

    #[test]
    fn block_scalar_ends_at_a_line_as_indented_as_its_parent() {
        let deep = "[".repeat(MAX_DEPTH + 1);
        let text = format!("e: |\n  text\nf: {deep}\n");
        assert_eq!(check(&text).map_err(|e| e.line), Err(3));
    }
}
