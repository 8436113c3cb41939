//! Graphviz dot and Mermaid: a box per resource, grouped by authority, and
//! an arrow per reference, labelled with its weight when it has one.
//! Written as they are drawn, like the tree.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::super::target::{id_of, short_version};
use super::super::text::shown;
use super::{Model, Node};

/// The group of resources whose names have no authority.
const OLD_STYLE: &str = "old-style names (default servers)";

impl Model<'_> {
    /// Writes Graphviz dot to `out`: a `cluster_*` subgraph per authority.
    pub(crate) fn dot<W: Write + ?Sized>(&self, out: &mut W) -> io::Result<()> {
        out.write_all(
            b"digraph xdsfed {\n  rankdir=LR;\n  node [shape=box, style=rounded, fontname=\"monospace\"];\n",
        )?;
        for (i, (authority, ids)) in self.by_authority().into_iter().enumerate() {
            let title = authority.map_or(OLD_STYLE.to_owned(), shown);
            write!(
                out,
                "  subgraph cluster_{i} {{\n    label={};\n    style=dashed;\n",
                dot_quote(&title)
            )?;
            for id in ids {
                let label = dot_quote(&self.label(id, "\n"));
                let colour = dot_colour(&self.nodes[id]);
                writeln!(out, "    n{id} [label={label}{colour}];")?;
            }
            out.write_all(b"  }\n")?;
        }
        for e in &self.edges {
            match e.weight {
                Some(w) => writeln!(out, "  n{} -> n{} [label=\"{w}\"];", e.from, e.to)?,
                None => writeln!(out, "  n{} -> n{};", e.from, e.to)?,
            }
        }
        out.write_all(b"}\n")
    }

    /// Writes a Mermaid flowchart to `out`: a subgraph per authority,
    /// failed resources in red.
    pub(crate) fn mermaid<W: Write + ?Sized>(&self, out: &mut W) -> io::Result<()> {
        out.write_all(b"flowchart LR\n")?;
        for (i, (authority, ids)) in self.by_authority().into_iter().enumerate() {
            let title = authority.map_or(OLD_STYLE.to_owned(), shown);
            writeln!(out, "  subgraph a{i}[\"{}\"]", mermaid_text(&title))?;
            for id in ids {
                let label = mermaid_text(&self.label(id, "<br/>"));
                writeln!(out, "    n{id}[\"{label}\"]")?;
            }
            out.write_all(b"  end\n")?;
        }
        for e in &self.edges {
            match e.weight {
                Some(w) => writeln!(out, "  n{} -->|{w}| n{}", e.from, e.to)?,
                None => writeln!(out, "  n{} --> n{}", e.from, e.to)?,
            }
        }
        self.mermaid_failed(out)
    }

    /// The class that marks failed resources, and the list of them.
    fn mermaid_failed<W: Write + ?Sized>(&self, out: &mut W) -> io::Result<()> {
        let mut failed = (0..self.nodes.len())
            .filter(|&id| self.nodes[id].error().is_some())
            .peekable();
        if failed.peek().is_none() {
            return Ok(());
        }
        out.write_all(b"  classDef failed stroke:#d00,color:#d00\n  class ")?;
        for (i, id) in failed.enumerate() {
            let comma = if i == 0 { "" } else { "," };
            write!(out, "{comma}n{id}")?;
        }
        out.write_all(b" failed\n")
    }

    /// Node ids grouped by authority (`None`: old-style names), groups in
    /// name order.
    fn by_authority(&self) -> BTreeMap<Option<&str>, Vec<usize>> {
        let mut groups: BTreeMap<Option<&str>, Vec<usize>> = BTreeMap::new();
        for (id, node) in self.nodes.iter().enumerate() {
            groups.entry(node.authority()).or_default().push(id);
        }
        groups
    }

    /// A box's text, its lines joined by `newline`: kind, id, version,
    /// endpoint count, and whether it failed.
    fn label(&self, id: usize, newline: &str) -> String {
        let node = &self.nodes[id];
        let mut label = format!("{}{newline}{}", node.kind(), shown(id_of(node.name())));
        if let Some(v) = node.version() {
            label.push_str(&format!("{newline}v {}", shown(short_version(&v.as_str()))));
        }
        let n = node.endpoint_count();
        if n > 0 {
            let s = if n == 1 { "" } else { "s" };
            label.push_str(&format!("{newline}{n} endpoint{s}"));
        }
        if node.error().is_some() {
            label.push_str(&format!("{newline}✗ failed"));
        } else if node.ambient_error().is_some() {
            label.push_str(&format!("{newline}⚠ ambient error"));
        }
        label
    }
}

/// The attributes that colour a failed (red) or degraded (orange) box.
fn dot_colour(node: &Node<'_>) -> &'static str {
    if node.error().is_some() {
        ", color=red, fontcolor=red"
    } else if node.ambient_error().is_some() {
        ", color=orange"
    } else {
        ""
    }
}

/// A dot string literal.
fn dot_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text inside a Mermaid `["…"]` label: quotes become entities.
fn mermaid_text(text: &str) -> String {
    text.replace('"', "#quot;")
}
