//! The `dls` master: reads platform and cluster files, plans with
//! [`dls_lp`], and (in later modules) runs batches on worker daemons.

pub mod calibrate;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod demo;
pub mod executor;
pub mod experiment;
pub mod gantt;
pub mod learn;
pub mod link;
pub mod local;
pub mod npy;
pub mod partition_cmd;
pub mod plan_report;
pub mod platform_file;
pub mod report;
pub mod run;
pub mod session;
pub mod trace;
