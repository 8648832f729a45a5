//! What a plan or a run writes: the summary table and JSON, the Chrome
//! trace, the SVG Gantt chart, `.npy` matrices, and the SVG helpers shared
//! with the experiment charts, and atomic file replacement. Pure formatting over finished data.

mod atomic;
pub mod gantt;
pub mod journal;
pub mod npy;
pub mod plan_report;
pub mod product;
pub mod report;
pub mod resume;
pub mod status;
pub mod svg;
pub mod table;
pub mod trace;

pub use atomic::atomic_write;
