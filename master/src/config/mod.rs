//! Files the user writes or the master keeps between runs: cluster files,
//! platform files, learned cost models. Parsing and validation only: no
//! sockets, no planning.

pub mod cluster;
pub mod learn;
pub mod platform_file;
