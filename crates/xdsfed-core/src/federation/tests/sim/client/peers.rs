//! The four peers, by label.

use std::collections::BTreeMap;
use std::ops::Index;

use super::{Peer, SERVERS};

/// The peers, in [`SERVERS`] order. A run looks a peer up hundreds of
/// thousands of times, so by its label's position rather than in a map.
pub(super) struct Peers(Vec<Peer>);

impl Peers {
    pub(super) fn new(mut by_label: BTreeMap<&'static str, Peer>) -> Self {
        let peers = SERVERS
            .iter()
            .map(|label| {
                by_label
                    .remove(label)
                    .expect("every server in the bootstrap")
            })
            .collect();
        Peers(peers)
    }

    /// The position of `label`: its authority's letter, then its priority.
    fn slot(label: &str) -> usize {
        match label.as_bytes() {
            [authority @ (b'a' | b'b'), priority @ (b'1' | b'2')] => {
                usize::from(authority - b'a') * 2 + usize::from(priority - b'1')
            }
            _ => panic!("no server {label}"),
        }
    }

    pub(super) fn get_mut(&mut self, label: &str) -> &mut Peer {
        &mut self.0[Self::slot(label)]
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Peer> {
        self.0.iter()
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Peer> {
        self.0.iter_mut()
    }
}

impl Index<&str> for Peers {
    type Output = Peer;

    fn index(&self, label: &str) -> &Peer {
        &self.0[Self::slot(label)]
    }
}
