//! The `dls` master: reads platform and cluster files, plans with
//! [`dls_lp`], and (in later modules) runs batches on worker daemons.

pub mod cli;
pub mod executor;
pub mod npy;
pub mod plan_report;
pub mod platform_file;
