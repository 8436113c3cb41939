//! The model as JSON, serialized straight from the borrowed model:
//! `serde_json::to_writer` writes each resource, edge and endpoint line as
//! it reaches it, with no `serde_json::Value` of the whole graph first.
//!
//! ```text
//! {"edges":[{"from":NAME,"to":NAME,"weight":70|null},…],"generation":4,"ok":true,
//!  "resources":[{"ambient_error":…,"authority":…,"endpoints":["cloud/cloud-a  127.0.0.1:39417",…],
//!                "error":…,"kind":"Cluster","name":NAME,"version":…},…]}
//! ```
//!
//! Every object lists its keys in alphabetical order: the order they had
//! when the output was a `serde_json::Value`, whose maps sort their keys
//! (serde_json's `preserve_order` is off). Names and messages are JSON
//! strings, escaped by serde_json, not by the terminal's rules.

use std::fmt;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::{Edge, Model, Node};

/// A [`Model`] as JSON; see the [module docs](self).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Json<'m, 'a>(&'m Model<'a>);

impl<'a> Model<'a> {
    /// The model as a JSON object (`edges`, `generation`, `ok`,
    /// `resources`), serialized as it is written.
    pub(crate) fn json(&self) -> Json<'_, 'a> {
        Json(self)
    }
}

impl Serialize for Json<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let model = self.0;
        let edges = SeqOf(|| model.edges.iter().map(|edge| EdgeJson { model, edge }));
        let resources = SeqOf(|| model.nodes.iter().map(NodeJson));
        let mut object = serializer.serialize_struct("Snapshot", 4)?;
        object.serialize_field("edges", &edges)?;
        object.serialize_field("generation", &model.generation)?;
        object.serialize_field("ok", &model.ok)?;
        object.serialize_field("resources", &resources)?;
        object.end()
    }
}

/// A resource: its kind, full name, authority, version, errors and
/// endpoint lines.
struct NodeJson<'n, 'a>(&'n Node<'a>);

impl Serialize for NodeJson<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let node = self.0;
        let endpoints = SeqOf(|| node.endpoint_lines().map(Displayed));
        let mut object = serializer.serialize_struct("Resource", 7)?;
        object.serialize_field("ambient_error", &node.ambient_error().map(Displayed))?;
        object.serialize_field("authority", &node.authority())?;
        object.serialize_field("endpoints", &endpoints)?;
        object.serialize_field("error", &node.error().map(Displayed))?;
        object.serialize_field("kind", node.kind())?;
        object.serialize_field("name", node.name())?;
        object.serialize_field("version", &node.version().map(String::from))?;
        object.end()
    }
}

/// An edge, its ends by full name.
struct EdgeJson<'m, 'a> {
    model: &'m Model<'a>,
    edge: &'m Edge,
}

impl Serialize for EdgeJson<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let nodes = &self.model.nodes;
        let mut object = serializer.serialize_struct("Edge", 3)?;
        object.serialize_field("from", nodes[self.edge.from].name())?;
        object.serialize_field("to", nodes[self.edge.to].name())?;
        object.serialize_field("weight", &self.edge.weight)?;
        object.end()
    }
}

/// A sequence serialized from a fresh iterator, element by element.
struct SeqOf<F>(F);

impl<F, I> Serialize for SeqOf<F>
where
    F: Fn() -> I,
    I: IntoIterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq((self.0)())
    }
}

/// A value serialized as the string its `Display` writes, without building
/// that string first.
struct Displayed<T>(T);

impl<T: fmt::Display> Serialize for Displayed<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}
