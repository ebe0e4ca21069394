//! The network of confined jobs (issues 43 and 44): where the person's tools fetch
//! from ([`sources`]), which the allow-list is built from.

pub mod sources;
