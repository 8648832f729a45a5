//! Running batches: connections to workers ([`link`]), measuring them
//! ([`calibrate`]), the one-port state machine ([`executor`]) and the async
//! shell that carries out its commands ([`run`]), the public API
//! ([`session`]), and in-process workers for demos and tests ([`local`]).

pub mod calibrate;
pub mod executor;
pub mod link;
pub mod local;
pub mod run;
pub mod session;
