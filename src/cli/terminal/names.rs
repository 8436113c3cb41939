//! Short forms of resource names, type URLs and versions for columns and
//! event lines. They only cut: [`super::text`] escapes what they return.

/// `authority/id` for an `xdstp://` name (the type is said elsewhere),
/// the name itself otherwise.
pub fn short_name(name: &str) -> String {
    match name
        .strip_prefix("xdstp://")
        .and_then(|rest| rest.split_once('/'))
    {
        Some((authority, rest)) => {
            let id = rest.split_once('/').map_or(rest, |(_, id)| id);
            format!("{authority}/{id}")
        }
        None => name.to_owned(),
    }
}

/// The `id` of an `xdstp://` name, the name itself otherwise.
pub fn id_of(name: &str) -> &str {
    match name
        .strip_prefix("xdstp://")
        .and_then(|rest| rest.split_once('/'))
    {
        Some((_, rest)) => rest.split_once('/').map_or(rest, |(_, id)| id),
        None => name,
    }
}

/// The short name of a type URL: `Cluster`, `RouteConfiguration`, ….
pub fn type_short(type_url: &str) -> &str {
    type_url.rsplit(['/', '.']).next().unwrap_or(type_url)
}

/// The first 8 characters of a version: enough to tell versions apart.
pub fn short_version(version: &str) -> &str {
    version
        .char_indices()
        .nth(8)
        .map_or(version, |(end, _)| &version[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_drop_the_type_of_xdstp_names() {
        assert_eq!(
            short_name("xdstp://cloud.example/envoy.config.cluster.v3.Cluster/a/b"),
            "cloud.example/a/b"
        );
        assert_eq!(short_name("plain"), "plain");
        assert_eq!(
            id_of("xdstp://cloud.example/envoy.config.cluster.v3.Cluster/a"),
            "a"
        );
        assert_eq!(
            type_short("type.googleapis.com/envoy.config.cluster.v3.Cluster"),
            "Cluster"
        );
    }

    #[test]
    fn short_versions_are_eight_characters_of_any_version() {
        assert_eq!(short_version("0123456789abcdef"), "01234567");
        assert_eq!(short_version("v1"), "v1");
        // Not a byte slice: a multi-byte character cannot split.
        assert_eq!(short_version("ééééééééé"), "éééééééé");
        assert_eq!(short_version(&"é".repeat(40_000)).chars().count(), 8);
    }
}
