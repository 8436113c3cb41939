//! Choosing a virtual host by the request's authority, as Envoy and gRPC
//! (gRFC A28) do: among every domain of every virtual host, an exact match
//! wins, then the longest suffix wildcard (`*.example.com`), then the
//! longest prefix wildcard (`example.*`), then `*`. On a tie the first
//! virtual host wins. Matching ignores ASCII case; a wildcard stands for at
//! least one character.

/// One entry of a virtual host's `domains`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DomainPattern {
    Exact(String),
    /// `*` then this suffix.
    Suffix(String),
    /// This prefix then `*`.
    Prefix(String),
    Any,
    /// A `*` elsewhere: never matches.
    Invalid,
}

impl DomainPattern {
    pub(crate) fn parse(pattern: &str) -> Self {
        let pattern = pattern.to_ascii_lowercase();
        if pattern == "*" {
            return Self::Any;
        }
        match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
            (Some(suffix), None) if !suffix.contains('*') => Self::Suffix(suffix.to_owned()),
            (None, Some(prefix)) if !prefix.contains('*') => Self::Prefix(prefix.to_owned()),
            (None, None) if !pattern.contains('*') => Self::Exact(pattern),
            _ => Self::Invalid,
        }
    }

    /// How well this pattern matches `host` (lowercase): higher is better.
    fn score(&self, host: &str) -> Option<(u8, usize)> {
        match self {
            Self::Exact(d) => (d == host).then_some((3, d.len())),
            Self::Suffix(s) => {
                (host.len() > s.len() && host.ends_with(s.as_str())).then_some((2, s.len()))
            }
            Self::Prefix(p) => {
                (host.len() > p.len() && host.starts_with(p.as_str())).then_some((1, p.len()))
            }
            Self::Any => Some((0, 0)),
            Self::Invalid => None,
        }
    }
}

/// The index of the virtual host whose domains best match `host`.
pub(crate) fn best_match<'a>(
    virtual_hosts: impl IntoIterator<Item = &'a [DomainPattern]>,
    host: &str,
) -> Option<usize> {
    let host = host.to_ascii_lowercase();
    let mut best: Option<((u8, usize), usize)> = None;
    for (index, domains) in virtual_hosts.into_iter().enumerate() {
        for score in domains.iter().filter_map(|d| d.score(&host)) {
            // Strictly better only: the first virtual host wins a tie.
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, index));
            }
        }
    }
    best.map(|(_, index)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(hosts: &[&[&str]], host: &str) -> Option<usize> {
        let parsed: Vec<Vec<DomainPattern>> = hosts
            .iter()
            .map(|ds| ds.iter().map(|d| DomainPattern::parse(d)).collect())
            .collect();
        best_match(parsed.iter().map(Vec::as_slice), host)
    }

    #[test]
    fn exact_beats_suffix_beats_prefix_beats_any() {
        let hosts: &[&[&str]] = &[&["*"], &["foo.*"], &["*.example.com"], &["api.example.com"]];
        assert_eq!(pick(hosts, "api.example.com"), Some(3));
        assert_eq!(pick(hosts, "www.example.com"), Some(2));
        assert_eq!(pick(hosts, "foo.bar"), Some(1));
        assert_eq!(pick(hosts, "other"), Some(0));
    }

    #[test]
    fn the_longest_wildcard_wins_and_case_is_ignored() {
        let hosts: &[&[&str]] = &[&["*.com"], &["*.example.com"], &["a.*"], &["a.b.*"]];
        assert_eq!(pick(hosts, "WWW.Example.COM"), Some(1));
        assert_eq!(pick(hosts, "a.b.c"), Some(3));
    }

    #[test]
    fn a_wildcard_stands_for_at_least_one_character() {
        let hosts: &[&[&str]] = &[&["*.example.com"]];
        assert_eq!(pick(hosts, ".example.com"), None);
    }

    #[test]
    fn an_inner_wildcard_never_matches() {
        assert_eq!(DomainPattern::parse("a*b"), DomainPattern::Invalid);
        assert_eq!(DomainPattern::parse("*a*"), DomainPattern::Invalid);
        assert_eq!(pick(&[&["a*b"]], "axb"), None);
    }

    #[test]
    fn the_first_virtual_host_wins_a_tie() {
        assert_eq!(pick(&[&["*"], &["*"]], "x"), Some(0));
    }
}
