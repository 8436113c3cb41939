//! The indented tree: a heading, then each root with the resources it
//! reaches under it, errors and endpoints as leaves.
//!
//! ```text
//! snapshot 4 · 6 resources · ok
//! Listener greeter · cloud.example · cd32c182
//! └─ RouteConfiguration greeter · cloud.example · 2da0349c
//!    ├─ Cluster greeter-cloud (50) · cloud.example · d7486080
//!    │  └─ Endpoints greeter-cloud · cloud.example · 3d761c16
//!    │     └─ cloud/cloud-a  127.0.0.1:39417
//!    └─ Cluster greeter-onprem (50) · onprem.example · 39b92817
//!       └─ Endpoints greeter-onprem · onprem.example · 8232197d
//!          └─ onprem/rack-2  127.0.0.1:44839
//! ```
//!
//! Lines are written as they are drawn; the only text held is the prefix
//! of the current depth.

use std::fmt;
use std::io::{self, Write};

use super::super::target::{id_of, short_version};
use super::super::text::{message, shown};
use super::{Model, Node};

impl Model<'_> {
    /// Writes the indented tree to `out`, one line per resource, endpoints
    /// as leaves. Names, versions and messages from servers are escaped.
    pub(crate) fn tree<W: Write + ?Sized>(&self, out: &mut W) -> io::Result<()> {
        writeln!(
            out,
            "snapshot {} · {} resources · {}",
            self.generation,
            self.nodes.len(),
            if self.ok { "ok" } else { "has errors" }
        )?;
        let mut tree = Tree {
            model: self,
            out,
            prefix: String::new(),
            path: Vec::new(),
        };
        for &root in &self.roots {
            tree.node(root, None, Branch::ROOT)?;
        }
        Ok(())
    }
}

/// How a node hangs from its parent: what leads its own line, and what
/// leads the lines under it.
#[derive(Debug, Clone, Copy)]
struct Branch {
    lead: &'static str,
    under: &'static str,
}

impl Branch {
    const ROOT: Self = Self {
        lead: "",
        under: "",
    };
    const MIDDLE: Self = Self {
        lead: "├─ ",
        under: "│  ",
    };
    const LAST: Self = Self {
        lead: "└─ ",
        under: "   ",
    };

    /// The branch of the `index`th of `count` lines under one node.
    fn nth(index: usize, count: usize) -> Self {
        if index + 1 == count {
            Self::LAST
        } else {
            Self::MIDDLE
        }
    }
}

/// A tree being written.
struct Tree<'m, 'a, W: ?Sized> {
    model: &'m Model<'a>,
    out: &'m mut W,
    /// What leads every line under the current node: `│  ` or three spaces
    /// per ancestor.
    prefix: String,
    /// The nodes from the root down to the current one. A node met again on
    /// its own path gets its line but not its subtree, so that a cycle in a
    /// malformed snapshot ends.
    path: Vec<usize>,
}

impl<W: Write + ?Sized> Tree<'_, '_, W> {
    /// Node `id`'s line, then its notes and children.
    fn node(&mut self, id: usize, weight: Option<u32>, branch: Branch) -> io::Result<()> {
        let model = self.model;
        let node = &model.nodes[id];
        let children = model.children(id);
        self.heading(node, weight, branch, children.len())?;
        if self.path.contains(&id) {
            return Ok(());
        }
        self.path.push(id);
        let depth = self.prefix.len();
        self.prefix.push_str(branch.under);
        let count = note_count(node) + children.len();
        let notes = self.notes(node, count)?;
        for (i, edge) in children.enumerate() {
            self.node(edge.to, edge.weight, Branch::nth(notes + i, count))?;
        }
        self.prefix.truncate(depth);
        self.path.pop();
        Ok(())
    }

    /// `Kind id (weight) · authority · version`, the weight when the route
    /// splits traffic; a collection without a version counts its members.
    fn heading(
        &mut self,
        node: &Node<'_>,
        weight: Option<u32>,
        branch: Branch,
        children: usize,
    ) -> io::Result<()> {
        let out = &mut *self.out;
        let name = shown(id_of(node.name()));
        write!(out, "{}{}{} {name}", self.prefix, branch.lead, node.kind())?;
        if let Some(w) = weight {
            write!(out, " ({w})")?;
        }
        if let Some(a) = node.authority() {
            write!(out, " · {}", shown(a))?;
        }
        match node.version() {
            Some(v) => write!(out, " · {}", shown(short_version(&v.as_str())))?,
            None if node.kind() == "Collection" => {
                let s = if children == 1 { "" } else { "s" };
                write!(out, " · {children} member{s}")?;
            }
            None if node.error().is_none() => out.write_all(" · (none)".as_bytes())?,
            None => {}
        }
        out.write_all(b"\n")
    }

    /// The node's error, its ambient error and its endpoint lines, the
    /// first `count` lines under it; returns how many it wrote.
    fn notes(&mut self, node: &Node<'_>, count: usize) -> io::Result<usize> {
        let mut written = 0;
        if let Some(e) = node.error() {
            let branch = Branch::nth(written, count);
            self.note(branch, format_args!("✗ {}", message(&e.to_string())))?;
            written += 1;
        }
        if let Some(e) = node.ambient_error() {
            let branch = Branch::nth(written, count);
            let text = message(&e.to_string());
            self.note(branch, format_args!("⚠ still serving, but: {text}"))?;
            written += 1;
        }
        for line in node.endpoint_lines() {
            let branch = Branch::nth(written, count);
            self.note(branch, format_args!("{}", shown(&line.to_string())))?;
            written += 1;
        }
        Ok(written)
    }

    fn note(&mut self, branch: Branch, text: fmt::Arguments<'_>) -> io::Result<()> {
        writeln!(self.out, "{}{}{text}", self.prefix, branch.lead)
    }
}

/// How many lines [`Tree::notes`] writes for `node`.
fn note_count(node: &Node<'_>) -> usize {
    usize::from(node.error().is_some())
        + usize::from(node.ambient_error().is_some())
        + node.endpoint_count()
}
