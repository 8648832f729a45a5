//! The synchronous core of the `dls` master: every decision of a batch as
//! plain functions over its state, after the reactor of HyperQueue's
//! `tako`. The [`machine::BatchMachine`] takes what workers did, with
//! timestamps, and returns commands; the master's async shell carries
//! them out. This crate cannot do I/O: it depends on the planner
//! (`dls-lp`) and on the protocol's ids and codec only, never on tokio.
//!
//! ```
//! use dls_core::machine::{Config, Status};
//! use dls_core::sim::{simulate, Faults};
//! use dls_lp::{plan, Platform, Request, Strategy, Worker};
//!
//! let platform = Platform::new(vec![
//!     Worker::new("fast", 0.01, 0.1, 0.005),
//!     Worker::new("slow", 0.02, 0.3, 0.010),
//! ])?;
//! let pl = plan(&platform, &Request::new(100, Strategy::Rounds))?;
//! // Workers exactly as planned: the run ends when the plan says.
//! let run = simulate(&platform, platform.workers(), &pl, Config::simulated(), &Faults::default());
//! assert_eq!(run.status, Status::Done);
//! assert!((run.end - pl.makespan()).abs() <= 1e-9 * pl.makespan());
//! # Ok::<(), dls_lp::Error>(())
//! ```
//!
//! Modules: [`machine`] (the batch state machine, with online correction),
//! [`port`] (who holds the master's port), [`chunk`] (chunks and the
//! events about them), [`schedule`] (a round's
//! schedule: the plan's [`sequenced`] sequence or an [`on_demand`]
//! baseline), [`adapt`] (what correction decides), [`record`] (what a run
//! measured), [`sim`] (a simulated platform that drives the machine),
//! [`tuning`] (online correction's tuned numbers, [`TUNING`]).

pub mod adapt;
pub mod chunk;
pub mod exchange;
pub mod machine;
pub mod on_demand;
pub mod port;
pub mod product;
pub mod record;
pub mod schedule;
pub mod sequenced;
pub mod sim;
pub mod tuning;

pub use tuning::TUNING;
