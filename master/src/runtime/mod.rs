//! Running batches. Connections to workers ([`link`], owned by a [`pool`]),
//! measuring them ([`calibrate`]), checking every product received
//! ([`check`]), the async shell that carries out the batch machine's
//! commands ([`shell`], one [`link_task`] per worker; the machine itself
//! is `dls_core::machine`), and in-process workers for demos and tests
//! ([`local`]), and one large product ([`product`]).

pub mod batch;
pub mod calibrate;
pub mod check;
pub mod data;
pub mod link;
mod link_task;
pub mod local;
pub mod log;
mod pieces;
pub mod pool;
pub mod product;
pub mod random;
pub mod shell;
