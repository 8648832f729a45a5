//! The `dls-worker` command line (the binary's `main` only calls [`main`]).

use crate::{kernel, serve, Config};
use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The dls worker daemon: computes batches of matrix products for a dls master.
#[derive(Debug, Parser)]
#[command(name = "dls-worker", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    daemon: DaemonArgs,
    /// Log lines as text or as one JSON object per line (RUST_LOG sets what
    /// is logged; NO_COLOR turns colour off).
    #[arg(long, value_enum, default_value = "text", global = true)]
    log_format: dls_common::LogFormat,
}

#[derive(Debug, Args)]
struct DaemonArgs {
    /// Address to listen on, e.g. 0.0.0.0:7070 (port 0 picks a free one).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// File holding the shared token (else the DLS_TOKEN environment variable).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Accept masters without a token on a non-loopback address.
    #[arg(long)]
    insecure: bool,
    /// Threads of the matrix kernel [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Matrices held at once: bytes, or with a unit (512M, 2G; powers of
    /// 1024), or a share of the machine's memory (50%) [default: 50%].
    #[arg(long, value_parser = memory_size)]
    memory_limit: Option<u64>,
    /// Emulation: compute K times slower (compute, then wait K-1 times as long).
    #[arg(long, default_value_t = 1.0)]
    slowdown: f64,
    /// Emulation: from product AFTER of each batch on, compute FACTOR times
    /// as slowly again (AFTER:FACTOR, e.g. 100:3; a factor below 1 speeds
    /// up, down to no slowdown at all).
    #[arg(long, value_name = "AFTER:FACTOR", value_parser = crate::server::SpeedChange::parse)]
    speed_change: Option<crate::server::SpeedChange>,
    /// Emulation: compute every product K times over (real work, so a CPU
    /// quota on the daemon scales it; used by scripts/testbed.sh).
    #[arg(long, default_value_t = 1)]
    work_factor: u32,
    /// Compute only on the kernel's own threads (dls-kernel-N), so that a
    /// CPU quota on them caps computing alone (used by scripts/testbed.sh).
    #[arg(long)]
    isolate_compute: bool,
    /// Emulation: throttle this worker's reads and writes to MBPS megabytes (10^6 bytes) per second.
    #[arg(long)]
    link_rate: Option<f64>,
    /// Seconds a new connection has to complete the handshake.
    #[arg(long, default_value_t = 5.0)]
    handshake_timeout: f64,
    /// Seconds a master may stay silent (no frame, no heartbeat) before its
    /// session ends and the worker serves the next master.
    #[arg(long, default_value_t = crate::server::DEFAULT_IDLE_SECS as f64)]
    idle_timeout: f64,
    /// Connections open at once; at the cap the oldest one that has not
    /// authenticated is dropped for a newcomer.
    #[arg(long, default_value_t = 32)]
    max_connections: usize,
    /// Serve only masters that encrypt every frame (their --encrypt); needs
    /// a token. Without it, a master may still ask for encryption.
    #[arg(long)]
    encrypt: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure the kernel's GFLOP/s on products of one shape and type.
    Bench {
        /// Square products of size n (A, B and C n×n).
        #[arg(long, conflicts_with = "shape", required_unless_present = "shape")]
        size: Option<u32>,
        /// Rectangular products: A n×k, B k×m, C n×m, given as n,k,m.
        #[arg(long, value_name = "N,K,M", value_parser = dls_common::parse_shape)]
        shape: Option<dls_protocol::Shape>,
        /// The type of every matrix: float64 or float32.
        #[arg(long, value_parser = dls_common::parse_dtype, default_value = "float64")]
        dtype: dls_protocol::DType,
        /// One B shared by every product of the batch.
        #[arg(long)]
        shared_b: bool,
        /// Threads [default: all cores].
        #[arg(long)]
        threads: Option<usize>,
        /// Print the result as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

/// `--memory-limit`: a size with units or a share of this machine's memory.
fn memory_size(text: &str) -> Result<u64, String> {
    dls_common::parse_size(text, dls_common::meminfo_bytes("MemTotal"))
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn daemon(args: DaemonArgs) -> Result<()> {
    let Some(listen) = args.listen else {
        bail!("--listen ADDR is required (e.g. --listen 0.0.0.0:7070), or use `dls-worker bench`");
    };
    let token = dls_common::load_token(args.token_file.as_deref())?;
    if token.is_none() && !listen.ip().is_loopback() && !args.insecure {
        bail!(
            "refusing to listen on {listen} without a token: pass --token-file FILE or set DLS_TOKEN (and give the master the same), or --insecure to accept any master"
        );
    }
    if !(args.slowdown.is_finite() && args.slowdown >= 1.0) {
        bail!("--slowdown must be a number >= 1 (got {})", args.slowdown);
    }
    if let Some(r) = args.link_rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--link-rate must be a positive number of MB/s (got {r})");
        }
    }
    if args.work_factor == 0 {
        bail!("--work-factor must be at least 1");
    }
    if !(args.handshake_timeout.is_finite() && args.handshake_timeout > 0.0) {
        bail!("--handshake-timeout must be a positive number of seconds");
    }
    if !(args.idle_timeout.is_finite() && args.idle_timeout >= 1.0) {
        bail!("--idle-timeout must be at least 1 second (masters send a heartbeat every 0.25 s)");
    }
    if args.max_connections < 2 {
        bail!("--max-connections must be at least 2");
    }
    let threads = args.threads.unwrap_or_else(cores);
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    let mut cfg = Config::new(
        threads,
        args.memory_limit.unwrap_or_else(dls_common::default_memory_limit),
    );
    cfg.token = token;
    cfg.slowdown = args.slowdown;
    cfg.speed_change = args.speed_change;
    cfg.link_rate = args.link_rate.map(|mb| mb * 1e6);
    cfg.work_factor = args.work_factor;
    cfg.isolate_compute = args.isolate_compute;
    cfg.handshake_timeout = Duration::from_secs_f64(args.handshake_timeout);
    cfg.idle_timeout = Duration::from_secs_f64(args.idle_timeout);
    cfg.max_connections = args.max_connections;
    if args.encrypt && cfg.token.is_none() {
        bail!("--encrypt needs a token (the keys are derived from it): give --token-file or set DLS_TOKEN");
    }
    cfg.encrypt = args.encrypt;
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding {listen}"))?;
        let addr = listener.local_addr()?;
        let shutdown = shutdown_signal()?;
        // Scripts and tests read this line to learn the port.
        println!("dls-worker listening on {addr}");
        tracing::info!(
            %addr, threads, memory_limit = cfg.memory_limit, slowdown = cfg.slowdown,
            link_rate = ?cfg.link_rate, work_factor = cfg.work_factor, auth = cfg.token.is_some(), "ready"
        );
        serve(listener, cfg, shutdown).await.context("serving")
    })
}

/// Registers SIGTERM and SIGINT handlers now and returns a future that ends on either.
/// Registering before the "listening" line is printed means a signal sent right after
/// it always shuts the daemon down cleanly instead of killing it.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

fn bench(form: dls_protocol::Form, threads: Option<usize>, json: bool) -> Result<()> {
    let threads = threads.unwrap_or_else(cores).max(1);
    let k = kernel::Kernel::new(threads).map_err(anyhow::Error::msg)?;
    let gflops = kernel::gflops(&k, &form).map_err(anyhow::Error::msg)?;
    let dls_protocol::Shape { n, k, m } = form.shape;
    if json {
        println!(
            "{}",
            serde_json::json!({
                "size": n, "shape": [n, k, m], "dtype": form.dtype.name(), "shared_b": form.shared_b,
                "threads": threads, "kernel": kernel::KERNEL, "gflops": gflops,
            })
        );
    } else {
        println!("{}: {form}, {threads} thread(s): {gflops:.1} GFLOP/s", kernel::KERNEL);
    }
    Ok(())
}

/// The products `dls-worker bench` times: square of `--size`, or of
/// `--shape` (whose dimensions `parse_shape` has checked).
fn bench_form(
    size: Option<u32>,
    shape: Option<dls_protocol::Shape>,
    dtype: dls_protocol::DType,
    shared_b: bool,
) -> Result<dls_protocol::Form> {
    let shape = match (shape, size) {
        (Some(shape), _) => shape,
        (None, Some(0)) => bail!("--size must be at least 1"),
        (None, Some(n)) => dls_protocol::Shape::square(n),
        (None, None) => bail!("give --size N or --shape N,K,M"),
    };
    Ok(dls_protocol::Form { shape, dtype, shared_b })
}

/// The whole `dls-worker` program: flags, logging, daemon or bench.
pub fn main() -> std::process::ExitCode {
    dls_common::return_freed_buffers();
    let cli = Cli::parse();
    dls_common::init_logging("info", cli.log_format);
    let res = match cli.command {
        Some(Command::Bench {
            size,
            shape,
            dtype,
            shared_b,
            threads,
            json,
        }) => bench_form(size, shape, dtype, shared_b).and_then(|form| bench(form, threads, json)),
        None => daemon(cli.daemon),
    };
    match res {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod help_tests {
    use clap::{CommandFactory, Parser};

    #[test]
    fn bench_refuses_what_it_cannot_time_by_name() {
        let parse = |args: &[&str]| {
            super::Cli::try_parse_from([&["dls-worker", "bench"], args].concat()).map_err(|e| e.to_string())
        };
        let e = parse(&["--shape", "3,4"]).expect_err("two dimensions");
        assert!(e.contains("give n,k,m"), "{e}");
        let e = parse(&["--shape", "3,0,4"]).expect_err("a zero dimension");
        assert!(e.contains("at least 1"), "{e}");
        let e = parse(&["--size", "64", "--dtype", "float16"]).expect_err("a type");
        assert!(e.contains("float32 or float64"), "{e}");
        assert!(parse(&[]).is_err(), "a size or a shape is needed");
        let f64 = dls_protocol::DType::F64;
        let e = super::bench_form(Some(0), None, f64, false).expect_err("size 0");
        assert!(e.to_string().contains("--size must be at least 1"), "{e}");
        let form = super::bench_form(None, Some(dls_protocol::Shape { n: 2, k: 3, m: 4 }), f64, true).expect("a shape");
        assert_eq!((form.shape.k, form.shared_b), (3, true));
        assert_eq!(
            super::bench_form(Some(5), None, f64, false).expect("a size").shape,
            dls_protocol::Shape::square(5)
        );
    }

    #[test]
    fn every_option_of_every_command_says_what_it_is() {
        let missing = dls_common::undocumented(&super::Cli::command());
        assert!(missing.is_empty(), "options without help:\n{}", missing.join("\n"));
    }
}
