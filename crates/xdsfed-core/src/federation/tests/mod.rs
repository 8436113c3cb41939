//! Deterministic tests of the federation core's rules, each named after
//! the rule it checks (docs/rules.md lists them), and the whole-client
//! simulation.

mod alt;
mod collections;
mod fallback;
mod reachability;
mod redirects;
mod servers;
mod sim;
mod support;
