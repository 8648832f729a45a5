//! The `dls` planner: divisible-load schedules for a master and p workers
//! under the one-port model with return messages, after Beaumont, Marchal,
//! Rehn and Robert, *FIFO scheduling of divisible loads with return messages
//! under the one-port model* (LIP research report 2005-52).
//!
//! Pure and synchronous: no I/O, no threads, no serialisation. Callers
//! convert their own types at the boundary.
//!
//! ```
//! use dls_lp::{plan, Platform, Request, Strategy, Worker};
//!
//! let platform = Platform::new(vec![
//!     Worker::new("fast", 0.01, 0.1, 0.005),
//!     Worker::new("slow", 0.02, 0.3, 0.010),
//! ])?;
//! let p = plan(&platform, &Request::new(100, Strategy::Fifo))?;
//! assert_eq!(p.loads.iter().sum::<u64>(), 100);
//! assert!(p.optimal);
//! assert!(p.makespan() >= p.makespan_rational());
//! # Ok::<(), dls_lp::Error>(())
//! ```
//!
//! Modules: [`platform`] (validated model), [`schedule`] (scenarios and
//! the timeline of rational loads), [`sequence`] (what every plan is: the
//! chunks, their transfers on the port in order and their predicted times,
//! by the one execution rule the runtime follows), [`lp`] (the reference
//! LP for any pair of orders), [`search`] (the one-round solvers), [`fast`]
//! (exact O(p)-per-pass FIFO and closed-form LIFO), [`rounding`] (whole
//! units), [`plan`](mod@plan) (the strategies), [`rounds`] (multi-round sequences),
//! [`bound`] (the steady-state bound), [`lane`] (how transfers share a
//! shared uplink), [`pace`] (paced sends behind a shared uplink),
//! [`baseline`] (loads chosen elsewhere, with their predicted sequence),
//! [`partition`] (partitioning with speed functions), [`tol`] (every
//! tolerance).

pub mod admitted;
pub mod baseline;
pub mod bound;
pub mod choice;
pub mod columns;
pub mod error;
pub mod fast;
pub mod lane;
pub mod lp;
pub mod opening;
pub mod pace;
pub mod paced;
pub mod partition;
pub mod plan;
pub mod platform;
pub mod product;
pub mod rectangles;
pub mod rounding;
pub mod rounds;
pub mod schedule;
pub mod search;
pub mod sequence;
pub mod tol;
pub mod tuning;
pub mod uplink;

pub use bound::{steady_state, steady_state_uplink, SteadyState};
pub use error::{Error, Result};
pub use paced::plan_paced;
pub use plan::{plan, plan_on, Plan, Problem, Request, Strategy};
pub use platform::{Latency, Platform, Worker};
pub use rounding::Rounding;
pub use schedule::{Ports, Scenario, Timeline, Transfer, Uplink, WorkerTimes};
pub use sequence::Sequence;
pub use tuning::{Tuning, TUNING};
