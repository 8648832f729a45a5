//! The `dls` master: connects to worker daemons ([`link`]), measures them
//! ([`calibrate`]), plans with [`dls_lp`], carries out the plan under one
//! port ([`executor`] decides, [`run`] does the I/O), recovers from lost
//! workers, and reports what was predicted against what happened
//! ([`report`], [`trace`], [`gantt`]). [`session`] is the entry point for
//! programs; [`cli`] and [`commands`] are the `dls` command line.

pub mod calibrate;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod demo;
pub mod executor;
pub mod experiment;
pub mod experiment_cmd;
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
