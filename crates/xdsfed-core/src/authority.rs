//! The authority registry: which servers serve which authority.
//!
//! Placeholder: the naming issue fills this module in.
