//! Streamable HTTP (2025-03-26 and later): the client ([`client`]).

pub mod client;
