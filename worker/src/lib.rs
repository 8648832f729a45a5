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
pub mod kernel;
pub mod server;
pub mod throttle;

pub use server::{serve, Config};

/// Half the machine's memory (from /proc/meminfo), or 4 GiB where it is unknown.
pub fn default_memory_limit() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(4 << 30, |kb| kb * 1024 / 2)
}

/// The shared token from `file`, else the `DLS_TOKEN` environment variable,
/// else none. Master and workers take it the same two ways.
pub fn load_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<dls_protocol::Token>> {
    use anyhow::Context;
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading token file {}", path.display()))?;
        return dls_protocol::Token::parse(&text)
            .map(Some)
            .with_context(|| format!("token file {} is empty", path.display()));
    }
    match std::env::var("DLS_TOKEN") {
        Ok(v) => Ok(Some(
            dls_protocol::Token::parse(&v).context("DLS_TOKEN is set but empty")?,
        )),
        Err(_) => Ok(None),
    }
}
