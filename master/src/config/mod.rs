//! Files the user writes: cluster files and platform files. Parsing and
//! validation only: no sockets, no planning.

pub mod cluster;
pub mod platform_file;
pub mod scaling;
