//! The `dls` worker daemon: it accepts one authenticated master at a time,
//! receives chunks of matrix products, computes them with a real GEMM
//! ([`kernel`]), and returns each chunk's results only when the master grants
//! it the port.
//!
//! ```no_run
//! # async fn doc() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let cfg = dls_worker::Config::new(1, 1 << 30);
//! dls_worker::serve(listener, cfg, async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

pub mod cli;
pub mod config;
pub mod gate;
pub mod kernel;
mod relay;
pub mod server;
mod session;
pub mod throttle;

pub use server::{serve, Config};
// The helpers both binaries share live in `dls-common`.
pub use dls_common::{default_memory_limit, init_logging, load_token, parse_size, LogFormat};
