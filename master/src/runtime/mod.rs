//! Running batches. Connections to workers ([`link`], owned by a [`pool`]),
//! measuring them ([`calibrate`]), checking every product received
//! ([`check`]), the batch state machine ([`machine`],
//! over the round schedules of [`executor`], recording into [`record`]), the
//! async shell that carries out its commands ([`shell`], one
//! [`link_task`] per worker), the public API ([`session`]), and in-process
//! workers for demos and tests ([`local`]).

pub mod adapt;
pub mod batch;
pub mod calibrate;
pub mod check;
pub mod data;
pub mod executor;
pub mod link;
mod link_task;
pub mod local;
pub mod machine;
pub mod on_demand;
pub mod pool;
pub mod record;
pub mod sequenced;
pub mod shell;
