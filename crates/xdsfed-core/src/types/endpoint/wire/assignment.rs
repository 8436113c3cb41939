//! A `ClusterLoadAssignment` of the common shape, read straight from its
//! bytes.
//!
//! ```text
//! ClusterLoadAssignment
//! ├─ 1 cluster_name                  string
//! └─ 2 endpoints: LocalityLbEndpoints   (repeated)
//!    ├─ 1 locality: Locality
//!    │  ├─ 1 region                  string
//!    │  ├─ 2 zone                    string
//!    │  └─ 3 sub_zone                string
//!    ├─ 2 lb_endpoints: LbEndpoint   (repeated; each of the common shape)
//!    ├─ 3 load_balancing_weight: UInt32Value
//!    └─ 5 priority                   varint
//! ```
//!
//! Rule: as for a bare endpoint, the walk answers only where it is sure to
//! agree with the full decode and `validate_load_assignment`: every
//! endpoint of the common shape and valid, each locality's endpoint
//! weights adding up to at most 4294967295, no locality twice in one
//! priority (an unset locality differs from an empty one, as the full
//! path tells them apart), priorities 0..=N without holes. Any other field
//! (`policy`, `named_endpoints`, a locality's `metadata`, `proximity` or
//! LB configuration, LEDS included), a singular field repeated, or a value
//! the full path refuses leaves the decision to it, with its errors.
//!
//! A first, shallow walk ([`size`]) finds the name and counts the
//! localities and endpoints, without descending into the endpoints, so
//! that the view's lists are allocated once at their size; the second
//! ([`walk`]) checks everything and tells the view what to hold, which is
//! dropped if a check made last (on all localities together) fails.

use super::{Common, Cursor, Seen, lb_endpoint_in, uint32_value};

/// What a walk over an assignment meets, in the order the view holds it.
#[derive(Debug)]
pub(in crate::types::endpoint) enum Event<'a> {
    /// A locality, before its endpoints.
    Locality(Locality<'a>),
    /// An endpoint of the last locality.
    Endpoint(Common<'a>),
}

/// A locality of the common shape, without its endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::types::endpoint) struct Locality<'a> {
    /// `priority`.
    pub(in crate::types::endpoint) priority: u32,
    /// `locality`'s region, zone and sub-zone; `None` when it is unset.
    pub(in crate::types::endpoint) place: Option<[&'a str; 3]>,
    /// `load_balancing_weight`, 0 when unset.
    pub(in crate::types::endpoint) weight: u32,
    /// How many `lb_endpoints` follow.
    pub(in crate::types::endpoint) endpoints: usize,
}

/// What an assignment holds, found without reading its endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::types::endpoint) struct Size<'a> {
    /// `cluster_name`, which the view holds first.
    pub(in crate::types::endpoint) name: &'a str,
    /// How many localities it lists.
    pub(in crate::types::endpoint) localities: usize,
    /// How many endpoints they list together.
    pub(in crate::types::endpoint) endpoints: usize,
}

/// `ClusterLoadAssignment.cluster_name`, `.endpoints`.
const CLUSTER_NAME: u64 = super::key(1, super::DELIMITED);
const LOCALITIES: u64 = super::key(2, super::DELIMITED);
/// `LocalityLbEndpoints.locality`, `.lb_endpoints`,
/// `.load_balancing_weight`, `.priority`.
const PLACE: u64 = super::key(1, super::DELIMITED);
const LB_ENDPOINTS: u64 = super::key(2, super::DELIMITED);
const LOCALITY_WEIGHT: u64 = super::key(3, super::DELIMITED);
const PRIORITY: u64 = super::key(5, super::VARINT);
/// `Locality.region`, `.zone`, `.sub_zone`.
const REGION: u64 = super::key(1, super::DELIMITED);
const ZONE: u64 = super::key(2, super::DELIMITED);
const SUB_ZONE: u64 = super::key(3, super::DELIMITED);

/// The name and counts of the assignment encoded in `bytes`, read without
/// descending into its endpoints; `None` when its fields down to its
/// localities' are not those of the common shape.
pub(in crate::types::endpoint) fn size(bytes: &[u8]) -> Option<Size<'_>> {
    let mut message = Cursor::new(bytes);
    let mut seen = Seen::default();
    let mut size = Size {
        name: "",
        localities: 0,
        endpoints: 0,
    };
    while !message.is_empty() {
        let key = message.varint()?;
        match key {
            CLUSTER_NAME => {
                seen.first(key)?;
                size.name = message.string()?.0;
            }
            // Repeated: each is a locality of its own.
            LOCALITIES => {
                size.localities += 1;
                size.endpoints += head(message.delimited()?)?.endpoints;
            }
            _ => return None,
        }
    }
    Some(size)
}

/// Walks the assignment encoded in `bytes`, whose [`size`] is `size`,
/// telling `visit` of each locality and each endpoint: `None` as soon as
/// the assignment is not of the common shape or not valid, or `visit` says
/// `None`. Each locality and each endpoint is checked before `visit` is
/// told of it, but for what takes them all (a locality's endpoint weights
/// add up to at most 4294967295, no locality twice in one priority,
/// priorities without holes), checked after them: `None` then means that
/// what was told must be forgotten.
pub(in crate::types::endpoint) fn walk<'a>(
    bytes: &'a [u8],
    size: &Size<'_>,
    mut visit: impl FnMut(Event<'a>) -> Option<()>,
) -> Option<()> {
    let mut message = Cursor::new(bytes);
    let mut localities = Vec::with_capacity(size.localities);
    while !message.is_empty() {
        match message.varint()? {
            // Read by `size`, held first.
            CLUSTER_NAME => {
                message.delimited()?;
            }
            LOCALITIES => localities.push(locality(message.delimited()?, &mut visit)?),
            _ => return None,
        }
    }
    distinct_and_contiguous(&mut localities)
}

/// Tells of the locality encoded in `fields`, then of each of its
/// endpoints; the locality, once its endpoints are checked.
fn locality<'a>(
    fields: Cursor<'a>,
    visit: &mut impl FnMut(Event<'a>) -> Option<()>,
) -> Option<Locality<'a>> {
    let head = head(fields)?;
    visit(Event::Locality(head))?;
    let mut weights: u64 = 0;
    let mut rest = fields;
    while !rest.is_empty() {
        // `head` has checked every field; only endpoints are read again.
        match rest.varint()? {
            LB_ENDPOINTS => {
                let endpoint = lb_endpoint_in(rest.delimited()?)?;
                weights = weights.saturating_add(u64::from(endpoint.weight));
                visit(Event::Endpoint(endpoint))?;
            }
            PLACE | LOCALITY_WEIGHT => {
                rest.delimited()?;
            }
            PRIORITY => {
                rest.varint()?;
            }
            _ => return None,
        }
    }
    (weights <= u64::from(u32::MAX)).then_some(head)
}

/// A locality's fields but its endpoints, which are counted.
fn head(mut fields: Cursor<'_>) -> Option<Locality<'_>> {
    let mut seen = Seen::default();
    let mut head = Locality {
        priority: 0,
        place: None,
        weight: 0,
        endpoints: 0,
    };
    while !fields.is_empty() {
        let key = fields.varint()?;
        match key {
            LB_ENDPOINTS => {
                fields.delimited()?;
                head.endpoints += 1;
            }
            PLACE => {
                seen.first(key)?;
                head.place = Some(place(fields.delimited()?)?);
            }
            LOCALITY_WEIGHT => {
                seen.first(key)?;
                head.weight = uint32_value(fields.delimited()?)?;
            }
            // prost keeps the low 32 bits.
            PRIORITY => {
                seen.first(key)?;
                head.priority = fields.varint()? as u32;
            }
            _ => return None,
        }
    }
    Some(head)
}

/// A `Locality`'s region, zone and sub-zone, each `""` when unset.
fn place(mut fields: Cursor<'_>) -> Option<[&str; 3]> {
    let mut seen = Seen::default();
    let mut place = [""; 3];
    while !fields.is_empty() {
        let at = match fields.key(&mut seen)? {
            REGION => 0,
            ZONE => 1,
            SUB_ZONE => 2,
            _ => return None,
        };
        place[at] = fields.string()?.0;
    }
    Some(place)
}

/// `Some` when no locality appears twice in one priority and the
/// priorities are 0..=N without holes, as validation requires.
fn distinct_and_contiguous<'a>(localities: &mut [Locality<'a>]) -> Option<()> {
    let key = |l: &Locality<'a>| (l.priority, l.place);
    localities.sort_unstable_by_key(key);
    if localities.windows(2).any(|w| key(&w[0]) == key(&w[1])) {
        return None;
    }
    // Sorted, each priority is the one before it or the next one due.
    let mut due = 0u32;
    for locality in localities.iter() {
        if locality.priority == due {
            due = due.checked_add(1)?;
        } else if locality.priority.checked_add(1) != Some(due) {
            return None;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests;
