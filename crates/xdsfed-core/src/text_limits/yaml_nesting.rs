//! A bound on how deeply a YAML text nests collections, checked before the
//! YAML parser sees it.
//!
//! The parser's work per token grows with the flow nesting depth, so a
//! text of a hundred thousand unclosed `[` takes quadratic time (a 200 KB
//! bootstrap took 21 s); the deserializer refuses anything nested deeper
//! than 128 levels anyway, but only after the parser went through all of
//! it. This scan is linear and deliberately approximate, erring on the deep
//! side:
//!
//! - flow collections: it skips comments, quoted scalars and block scalars,
//!   counts `[` and `{` everywhere in flow context and, in block context,
//!   only where a node starts (brackets inside plain scalars such as
//!   `name: a[1` do not count);
//! - block collections: each indentation deeper than the enclosing lines'
//!   is a level, and so is each `- ` or `? ` that opens a node on a line
//!   (`- - - x` is three).
//!
//! The depth at a point is the block levels around it plus the flow levels.

/// Where the nesting first got deeper than the limit. The message names
/// the limit; the caller adds the line and column the way its other
/// syntax errors do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "collections nested deeper than {limit} levels (the nesting limit; refused before parsing)"
)]
pub struct TooDeep {
    /// The limit that was passed.
    pub limit: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    Single,
    Double,
}

/// The scanner's state across lines.
#[derive(Debug)]
struct Scan {
    limit: usize,
    /// Open flow collections.
    flow: usize,
    /// The indentations of the enclosing block lines, strictly increasing.
    indents: Vec<usize>,
    quote: Option<Quote>,
    /// Inside a block scalar whose header was on a line of this indentation.
    block_scalar: Option<usize>,
}

/// Checks that `text` nests collections at most `limit` deep, counting
/// indentation levels, `- ` and `? ` entries, and `[`/`{` depth (comments,
/// quoted and block scalars skipped).
///
/// ```
/// use xdsfed_core::text_limits::check_yaml_nesting;
///
/// assert!(check_yaml_nesting("a:\n  b: [1, {c: 2}]\n", 64).is_ok());
/// let deep = format!("a: {}", "[".repeat(100));
/// assert_eq!(check_yaml_nesting(&deep, 64).unwrap_err().line, 1);
/// ```
pub fn check_yaml_nesting(text: &str, limit: usize) -> Result<(), TooDeep> {
    let mut scan = Scan {
        limit,
        flow: 0,
        indents: Vec::new(),
        quote: None,
        block_scalar: None,
    };
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
        let content = line.trim_start();
        let starts_block_line = self.flow == 0
            && self.quote.is_none()
            && !content.is_empty()
            && !content.starts_with('#');
        if starts_block_line {
            self.indent(indent, number)?;
        }
        // Levels the line's own `- ` and `? ` indicators open.
        let mut inline_block = 0;
        // The character before the current one, `None` at the line's start.
        let mut previous: Option<char> = None;
        let mut chars = line.chars().enumerate().peekable();
        while let Some((column, c)) = chars.next() {
            let at = TooDeep {
                limit: self.limit,
                line: number,
                column: column + 1,
            };
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
                    let then_blank = chars.peek().is_none_or(|&(_, next)| next == ' ');
                    match c {
                        '#' if previous.is_none_or(char::is_whitespace) => return Ok(()),
                        '\'' if starts_node => self.quote = Some(Quote::Single),
                        '"' if starts_node => self.quote = Some(Quote::Double),
                        '|' | '>' if starts_node && self.flow == 0 => {
                            self.block_scalar = Some(indent);
                            return Ok(());
                        }
                        '-' | '?' if starts_node && self.flow == 0 && then_blank => {
                            inline_block += 1;
                            self.within_limit(inline_block, at)?;
                        }
                        '[' | '{' if starts_node || self.flow > 0 => {
                            self.flow += 1;
                            self.within_limit(inline_block, at)?;
                        }
                        ']' | '}' => self.flow = self.flow.saturating_sub(1),
                        _ => {}
                    }
                }
            }
            previous = Some(c);
        }
        Ok(())
    }

    /// Enters a block line of indentation `indent`: lines indented less
    /// than it are no longer open; a deeper one is a level.
    fn indent(&mut self, indent: usize, number: usize) -> Result<(), TooDeep> {
        while self.indents.last().is_some_and(|&open| open > indent) {
            self.indents.pop();
        }
        if self.indents.last().is_none_or(|&open| open < indent) {
            self.indents.push(indent);
        }
        self.within_limit(
            0,
            TooDeep {
                limit: self.limit,
                line: number,
                column: indent + 1,
            },
        )
    }

    /// Whether the depth, with `inline_block` levels opened on this line,
    /// is within the limit; `at` is where it would not be.
    fn within_limit(&self, inline_block: usize, at: TooDeep) -> Result<(), TooDeep> {
        let depth = self.indents.len() + inline_block + self.flow;
        if depth > self.limit { Err(at) } else { Ok(()) }
    }

    /// Whether a node may start after `previous`: at the line's start, after
    /// white space, and in flow context after an indicator.
    fn starts_node(&self, previous: Option<char>) -> bool {
        match previous {
            None => true,
            Some(p) if p.is_whitespace() => true,
            Some(p) => self.flow > 0 && matches!(p, '[' | '{' | ',' | ':'),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 128;

    fn check(text: &str) -> Result<(), TooDeep> {
        check_yaml_nesting(text, LIMIT)
    }

    #[test]
    fn shallow_collections_pass() {
        assert_eq!(check("a: [1, {b: [2, 3]}, [[4]]]\n"), Ok(()));
        assert_eq!(check(&"[".repeat(LIMIT - 1)), Ok(()));
    }

    #[test]
    fn one_level_too_deep_is_refused_where_it_happens() {
        let text = format!("a: 1\nb: {}", "[".repeat(LIMIT));
        assert_eq!(
            check(&text),
            Err(TooDeep {
                limit: LIMIT,
                line: 2,
                column: 3 + LIMIT
            })
        );
    }

    #[test]
    fn closed_collections_do_not_add_up() {
        let text = "- [[[]]]\n".repeat(10 * LIMIT);
        assert_eq!(check(&text), Ok(()));
    }

    #[test]
    fn brackets_in_comments_quotes_plain_and_block_scalars_do_not_count() {
        let deep = "[".repeat(LIMIT + 1);
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
        let deep = "[".repeat(LIMIT + 1);
        let text = format!("e: |\n  text\nf: {deep}\n");
        assert_eq!(check(&text).map_err(|e| e.line), Err(3));
    }

    #[test]
    fn deeper_indentation_is_a_level_and_shallower_closes_levels() {
        let nested: String = (0..=LIMIT)
            .map(|i| format!("{}k:\n", " ".repeat(i)))
            .collect();
        assert_eq!(check(&nested).map_err(|e| e.line), Err(LIMIT + 1));
        let siblings = "a:\n  b:\n    c: 1\n".repeat(10 * LIMIT);
        assert_eq!(check(&siblings), Ok(()));
    }

    #[test]
    fn dashes_on_one_line_are_levels_but_not_in_plain_scalars() {
        let dashes = "- ".repeat(LIMIT + 1);
        assert_eq!(check(&dashes).map_err(|e| e.line), Err(1));
        let plain = format!(
            "a: {}\nb: x-y - z\n",
            "- ".repeat(LIMIT + 1).replace("- ", "x- ")
        );
        assert_eq!(check(&plain), Ok(()));
    }

    #[test]
    fn block_and_flow_levels_add_up() {
        let text = format!("a:\n  b: {}", "[".repeat(LIMIT - 1));
        assert_eq!(check(&text).map_err(|e| e.line), Err(2));
    }
}
