//! The members of one LEDS collection, by name: what a graph holds of a
//! collection, and what an assignment's LEDS locality shows, shared.
//!
//! Rule: cloning a member list is a pointer copy, and a member's change
//! costs in proportion to the collection's size at most for a small
//! collection and to its logarithm for a large one, never a copy of the
//! members themselves. A collection of up to [`FEW`] members (the usual
//! locality of a few dozen endpoints) is one sorted array, 24 bytes a
//! member; a larger one is a persistent B-tree, whose change copies only
//! the nodes on its path. Either way the members iterate in name order
//! and read the same (test `both_forms_hold_the_same_members`).

use std::sync::Arc;

use imbl::OrdMap;

use super::LedsEndpoint;

/// Past this many members a collection is held as a B-tree: a change of a
/// sorted array copies the array.
const FEW: usize = 32;

type Member = (Arc<str>, Arc<LedsEndpoint>);

/// Where `name` is among `few` (sorted), or where it would go. The copy a
/// change names is usually the member's own (the client shares one copy of
/// each name), found by its address; a search by text compares the
/// collection's shared prefix again at each step.
fn find(few: &[Member], name: &Arc<str>) -> Result<usize, usize> {
    match few.iter().position(|(n, _)| Arc::ptr_eq(n, name)) {
        Some(at) => Ok(at),
        None => few.binary_search_by(|(n, _)| n.cmp(name)),
    }
}

/// The members of one LEDS collection, in name order; cheap to clone,
/// cheap to change (see the module docs).
///
/// ```
/// use std::sync::Arc;
/// use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address};
/// use envoy_types::pb::envoy::config::endpoint::v3::{Endpoint, LbEndpoint, lb_endpoint};
/// use xdsfed_core::types::{LedsEndpoint, LedsMembers};
///
/// let endpoint = |ip: &str| {
///     let socket = SocketAddress {
///         address: ip.into(),
///         port_specifier: Some(socket_address::PortSpecifier::PortValue(443)),
///         ..Default::default()
///     };
///     let message = LbEndpoint {
///         host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
///             address: Some(Address { address: Some(address::Address::SocketAddress(socket)) }),
///             ..Default::default()
///         })),
///         ..Default::default()
///     };
///     Arc::new(LedsEndpoint::new(&message).unwrap())
/// };
/// let mut members = LedsMembers::default();
/// members.insert("b".into(), endpoint("10.0.0.2"));
/// members.insert("a".into(), endpoint("10.0.0.1"));
/// let before = members.clone();
/// members.remove("b");
/// let addresses: Vec<_> = before.endpoints().map(|e| e.view().address).collect();
/// assert_eq!(addresses, ["10.0.0.1", "10.0.0.2"]);
/// assert_eq!(members.len(), 1);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct LedsMembers(Form);

#[derive(Clone, PartialEq, Eq)]
enum Form {
    /// Sorted by name, without repeats.
    Few(Arc<[Member]>),
    Many(OrdMap<Arc<str>, Arc<LedsEndpoint>>),
}

impl Default for LedsMembers {
    fn default() -> Self {
        LedsMembers(Form::Few(Arc::new([])))
    }
}

impl LedsMembers {
    /// How many members.
    pub fn len(&self) -> usize {
        match &self.0 {
            Form::Few(few) => few.len(),
            Form::Many(many) => many.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Member `name`'s endpoint.
    pub fn get(&self, name: &str) -> Option<&Arc<LedsEndpoint>> {
        match &self.0 {
            Form::Few(few) => few
                .binary_search_by(|(n, _)| (**n).cmp(name))
                .ok()
                .map(|at| &few[at].1),
            Form::Many(many) => many.get(name),
        }
    }

    /// Sets member `name` to `endpoint`; returns the endpoint it had.
    pub fn insert(
        &mut self,
        name: Arc<str>,
        endpoint: Arc<LedsEndpoint>,
    ) -> Option<Arc<LedsEndpoint>> {
        let few = match &mut self.0 {
            Form::Many(many) => return many.insert(name, endpoint),
            Form::Few(few) => few,
        };
        match find(few, &name) {
            Ok(at) => {
                let old = Arc::clone(&few[at].1);
                match Arc::get_mut(few) {
                    Some(only) => only[at].1 = endpoint,
                    // Shared with a snapshot: copied straight into one
                    // allocation of its exact size (an iterator of known
                    // length), not through a `Vec` first.
                    None => {
                        *few = few
                            .iter()
                            .enumerate()
                            .map(|(i, (name, old))| {
                                let value = if i == at { &endpoint } else { old };
                                (Arc::clone(name), Arc::clone(value))
                            })
                            .collect();
                    }
                }
                Some(old)
            }
            Err(at) if few.len() < FEW => {
                let mut grown = Vec::with_capacity(few.len() + 1);
                grown.extend_from_slice(&few[..at]);
                grown.push((name, endpoint));
                grown.extend_from_slice(&few[at..]);
                *few = Arc::from(grown);
                None
            }
            Err(_) => {
                let mut many: OrdMap<_, _> = few.iter().cloned().collect();
                many.insert(name, endpoint);
                self.0 = Form::Many(many);
                None
            }
        }
    }

    /// Removes member `name`; returns its endpoint. A large collection
    /// that shrinks stays a B-tree: going back and forth at the bound
    /// would copy it each time.
    pub fn remove(&mut self, name: &str) -> Option<Arc<LedsEndpoint>> {
        let few = match &mut self.0 {
            Form::Many(many) => return many.remove(name),
            Form::Few(few) => few,
        };
        let at = few.binary_search_by(|(n, _)| (**n).cmp(name)).ok()?;
        let old = Arc::clone(&few[at].1);
        let mut shrunk = Vec::with_capacity(few.len() - 1);
        shrunk.extend_from_slice(&few[..at]);
        shrunk.extend_from_slice(&few[at + 1..]);
        *few = Arc::from(shrunk);
        Some(old)
    }

    /// The members' names, in order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &Arc<str>> {
        self.iter().map(|(name, _)| name)
    }

    /// The members' endpoints, in name order.
    pub fn endpoints(&self) -> impl ExactSizeIterator<Item = &Arc<LedsEndpoint>> {
        self.iter().map(|(_, endpoint)| endpoint)
    }

    /// The members, in name order.
    pub fn iter(&self) -> Iter<'_> {
        match &self.0 {
            Form::Few(few) => Iter(Walk::Few(few.iter())),
            Form::Many(many) => Iter(Walk::Many(many.iter())),
        }
    }
}

impl std::fmt::Debug for LedsMembers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The members of a [`LedsMembers`], in name order.
pub struct Iter<'a>(Walk<'a>);

impl std::fmt::Debug for Iter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iter")
            .field("remaining", &self.size_hint().0)
            .finish()
    }
}

enum Walk<'a> {
    Few(std::slice::Iter<'a, Member>),
    Many(imbl::ordmap::Iter<'a, Arc<str>, Arc<LedsEndpoint>, imbl::shared_ptr::DefaultSharedPtr>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a Arc<str>, &'a Arc<LedsEndpoint>);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Walk::Few(few) => few.next().map(|(n, e)| (n, e)),
            Walk::Many(many) => many.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            Walk::Few(few) => few.size_hint(),
            Walk::Many(many) => many.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(port: u16) -> Arc<LedsEndpoint> {
        let assignment =
            crate::types::tests_support::load_assignment("m", &[("10.0.0.1", u32::from(port))]);
        let endpoint = &assignment.endpoints[0].lb_endpoints[0];
        Arc::new(LedsEndpoint::new(endpoint).expect("a valid endpoint"))
    }

    fn ports(members: &LedsMembers) -> Vec<(String, u16)> {
        members
            .iter()
            .map(|(n, e)| (n.to_string(), e.view().port))
            .collect()
    }

    /// A change named by the member's own copy of its name, or by another
    /// copy of the same text, replaces that member and no other.
    #[test]
    fn a_member_is_found_by_its_own_copy_or_its_text() {
        let names: Vec<Arc<str>> = ["m1", "m2", "m3"].into_iter().map(Arc::from).collect();
        let mut members = LedsMembers::default();
        for (i, name) in names.iter().enumerate() {
            members.insert(Arc::clone(name), endpoint(i as u16));
        }
        assert_eq!(
            members
                .insert(Arc::clone(&names[1]), endpoint(20))
                .map(|e| e.view().port),
            Some(1)
        );
        assert_eq!(
            members
                .insert(Arc::from("m3"), endpoint(30))
                .map(|e| e.view().port),
            Some(2)
        );
        assert_eq!(
            ports(&members),
            [("m1".into(), 0), ("m2".into(), 20), ("m3".into(), 30)]
        );
    }

    #[test]
    fn both_forms_hold_the_same_members() {
        // The same changes, past the bound and below it, read the same as
        // a sorted map of them.
        for count in [3, FEW, FEW + 20] {
            let mut members = LedsMembers::default();
            let mut model = std::collections::BTreeMap::new();
            for i in (0..count).rev() {
                let name = format!("m{i:03}");
                members.insert(Arc::from(name.as_str()), endpoint(i as u16));
                model.insert(name, i as u16);
            }
            let shared = members.clone();
            for i in (0..count).step_by(3) {
                let name = format!("m{i:03}");
                assert!(
                    members
                        .insert(Arc::from(name.as_str()), endpoint(9))
                        .is_some()
                );
                model.insert(name, 9);
            }
            for i in (1..count).step_by(4) {
                let name = format!("m{i:03}");
                assert!(members.remove(&name).is_some());
                model.remove(&name);
            }
            assert_eq!(members.remove("absent"), None);
            let expected: Vec<_> = model.into_iter().collect();
            assert_eq!(ports(&members), expected, "{count} members");
            assert_eq!(members.len(), expected.len());
            assert_eq!(members.get("m000").map(|e| e.view().port), Some(9));
            // The clone taken before the changes did not see them.
            assert_eq!(shared.len(), count);
            assert!(
                shared
                    .iter()
                    .all(|(n, e)| n[1..].parse() == Ok(e.view().port))
            );
        }
    }

    #[test]
    fn a_change_of_an_unshared_small_collection_is_made_in_place() {
        let mut members = LedsMembers::default();
        members.insert("a".into(), endpoint(1));
        members.insert("b".into(), endpoint(2));
        let Form::Few(before) = &members.0 else {
            panic!("a small collection is an array");
        };
        let at = before.as_ptr();
        members.insert("a".into(), endpoint(3));
        let Form::Few(after) = &members.0 else {
            panic!("a small collection is an array");
        };
        assert_eq!(after.as_ptr(), at);
        assert_eq!(ports(&members), [("a".into(), 3), ("b".into(), 2)]);
    }
}
