//! The `dls` master: connects to worker daemons ([`runtime::link`]),
//! measures them ([`runtime::calibrate`]), plans with [`dls_lp`], carries
//! out the plan under one port, recovers from lost workers, and reports what
//! was predicted against what happened ([`output`]). [`session`] is the
//! entry point for programs; [`cli`] is the `dls` command line.
//!
//! Rooms: [`cli`] (flags and subcommands), [`experiments`], [`demo`],
//! [`session`] and [`learn`] (the API over runs), [`output`] (summary,
//! trace, Gantt, `.npy`), [`runtime`] (links, calibration, state machine,
//! shell), [`config`] (files the user writes).

pub mod cli;
pub mod config;
pub mod demo;
pub mod experiments;
pub mod learn;
pub mod output;
mod runtime;
pub mod session;
