//! The `dls` command line: clap types and the helpers every command shares.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use dls_lp::{Ports, Strategy};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "dls",
    version,
    about = "Divisible-load scheduling of matrix products on a star of workers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log lines as text or as one JSON object per line (RUST_LOG sets what
    /// is logged; NO_COLOR turns colour off).
    #[arg(long, value_enum, default_value = "text", global = true)]
    pub log_format: dls_common::LogFormat,
}

/// What the products of a batch are: their shape, type, and whether one
/// B serves them all.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Products {
    /// Square products of size n (A, B and C n×n).
    #[arg(long, conflicts_with = "shape")]
    pub size: Option<usize>,
    /// Rectangular products: A n×k, B k×m, C n×m, given as n,k,m.
    #[arg(long, value_name = "N,K,M", value_parser = parse_shape)]
    pub shape: Option<dls_protocol::Shape>,
    /// The type of every matrix: float64 or float32 [default: float64, or the inputs'].
    #[arg(long, value_parser = parse_dtype)]
    pub dtype: Option<dls_protocol::DType>,
    /// One B (k×m) shared by every product, sent once to each worker.
    #[arg(long)]
    pub shared_b: bool,
}

pub use dls_common::{parse_dtype, parse_shape};

impl Products {
    /// The shape the flags give, if any, and which flag gave it.
    pub fn shape(&self) -> Result<Option<(dls_protocol::Shape, &'static str)>> {
        match (self.size, self.shape) {
            (Some(0), _) => anyhow::bail!("--size must be at least 1"),
            (Some(n), _) => {
                let n = u32::try_from(n).map_err(|_| {
                    anyhow::anyhow!("--size {n} is larger than the protocol carries (at most {})", u32::MAX)
                })?;
                Ok(Some((dls_protocol::Shape::square(n), "--size")))
            }
            (None, Some(s)) => Ok(Some((s, "--shape"))),
            (None, None) => Ok(None),
        }
    }

    /// The products the flags describe, with `default_n` when they give no
    /// shape (an error when there is none).
    pub fn form(&self, default_n: Option<u32>) -> Result<dls_protocol::Form> {
        let shape = match (self.shape()?, default_n) {
            (Some((s, _)), _) => s,
            (None, Some(n)) => dls_protocol::Shape::square(n),
            (None, None) => anyhow::bail!("give --size n or --shape n,k,m"),
        };
        Ok(dls_protocol::Form {
            shape,
            dtype: self.dtype.unwrap_or(dls_protocol::DType::F64),
            shared_b: self.shared_b,
        })
    }

    /// What input files must agree with.
    pub fn expect(&self) -> Result<crate::output::npy::Expect> {
        let shape = self.shape()?;
        Ok(crate::output::npy::Expect {
            shape: shape.map(|s| s.0),
            shape_flag: shape.map(|s| s.1),
            dtype: self.dtype,
            shared_b: self.shared_b,
        })
    }
}

/// `--strategy`: one of the planner's strategies, by name (the names
/// `dls_lp::Strategy` gives, listed in `--help` and in the error).
pub(crate) fn strategy_parser() -> impl clap::builder::TypedValueParser<Value = Strategy> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Strategy::ALL.map(Strategy::name)).try_map(|s| s.parse::<Strategy>())
}

const PORTS_HELP: &str = "The master's port model: measured (the uplink the platform file records in [uplink], which dls calibrate writes when it measures more than one port, or calibration measures in a run without a platform file; one port when none is recorded), 1 (one transfer at a time: the report's model), 2 (one send and one return at once)";

/// The port model asked for on the command line; `None`: the one
/// measured.
#[derive(Debug, Clone, Copy)]
pub struct PortsChoice(pub Option<Ports>);

impl PortsChoice {
    /// The model to plan with on `platform`.
    pub fn on(self, platform: &dls_lp::Platform) -> Ports {
        self.0.unwrap_or_else(|| platform.measured_ports())
    }
}

pub(crate) fn ports_parser() -> impl clap::builder::TypedValueParser<Value = PortsChoice> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["measured", "1", "2"]).map(|s| {
        PortsChoice(match s.as_str() {
            "1" => Some(Ports::One),
            "2" => Some(Ports::Two),
            _ => None,
        })
    })
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoundingArg {
    Paper,
    Refined,
}

#[derive(Debug, clap::Args)]
pub struct Workers {
    /// Cluster file (TOML, one [[worker]] with name and address each).
    #[arg(long, conflicts_with_all = ["workers", "slurm"], required_unless_present_any = ["workers", "slurm"])]
    pub cluster: Option<PathBuf>,
    /// Comma-separated host:port list instead of a cluster file.
    #[arg(long, conflicts_with = "slurm")]
    pub workers: Option<String>,
    /// The workers are this Slurm job's nodes (`scontrol show hostnames
    /// "$SLURM_JOB_NODELIST"`), each at --worker-port, named by host.
    #[arg(long)]
    pub slurm: bool,
    /// Port the workers listen on, with --slurm [default: 7070].
    #[arg(long)]
    pub worker_port: Option<u16>,
    /// File holding the shared token (else the DLS_TOKEN environment variable).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Encrypt and authenticate every frame (AES-256-GCM where both ends
    /// have AES instructions, ChaCha20-Poly1305 otherwise; keys from the
    /// token and the handshake); needs a token. Costs throughput: see the
    /// README.
    #[arg(long)]
    pub encrypt: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan a load on a platform file: orders, loads and the predicted timeline.
    Plan {
        /// Platform file (TOML, one [[worker]] table per worker with c, w, d).
        #[arg(long)]
        platform: PathBuf,
        /// Number of load units (matrix products) to plan.
        #[arg(long)]
        load: u64,
        /// The products planned for, when the platform file was measured for
        /// others: its costs are rescaled by its model (`dls calibrate
        /// --sizes`), or it is refused [default: the file's own].
        #[command(flatten)]
        products: Products,
        /// Which schedule: best (every one-round family and rounds, the fastest predicted),
        /// fifo, lifo, inc-c, inc-w (one round, sends in that order), rounds (multi-round).
        #[arg(long, default_value = "best", value_parser = strategy_parser())]
        strategy: Strategy,
        #[arg(long, default_value = "measured", value_parser = ports_parser(), help = PORTS_HELP)]
        ports: PortsChoice,
        /// Behind a shared uplink, never hold a worker's sends below its link's rate
        /// (by default sends may be paced so that they fit beside a faster link's).
        #[arg(long)]
        no_pace: bool,
        /// Whole-product rounding of the rational loads: paper (the report's) or refined (also moves single products).
        #[arg(long, value_enum, default_value = "refined")]
        rounding: RoundingArg,
        /// Print the plan as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Measure every worker (linearity test) and write a platform file.
    Calibrate {
        #[command(flatten)]
        workers: Workers,
        /// What one unit (one product) is [default: --size 128, float64].
        #[command(flatten)]
        products: Products,
        /// Calibrate at each of these square sizes (comma-separated, at
        /// least two) and write a model of how costs follow the size, so the
        /// file serves batches of any shape of the type; its own costs are
        /// for the last size.
        #[arg(long, value_delimiter = ',', conflicts_with_all = ["size", "shape"])]
        sizes: Option<Vec<u32>>,
        /// Where to write the platform file.
        #[arg(short = 'o', long)]
        output: PathBuf,
        /// Print the fits as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Fail if any worker cannot be reached or measured (by default it
        /// is left out, with a warning, and the others are calibrated).
        #[arg(long)]
        require_all: bool,
    },
    /// Run a batch of matrix products on the workers.
    Run(Box<RunArgs>),
    /// Ask each worker what it is doing (free or busy and with whom, cores,
    /// threads, memory, kernel, uptime, products served); exits non-zero
    /// when any cannot be reached.
    Status {
        #[command(flatten)]
        workers: Workers,
        /// Print the answers as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Wait up to SECS seconds for every worker to answer (for scripts
        /// that start workers, then run).
        #[arg(long, value_name = "SECS")]
        wait: Option<f64>,
    },
    /// Split N equal elements over processors with speed functions, bounds
    /// or cost functions (no communication).
    Partition {
        /// Speeds file (TOML, one [[processor]] with `speed` or `points` each).
        #[arg(long)]
        speeds: PathBuf,
        /// Number of equal elements to split.
        #[arg(long)]
        elements: u64,
        /// Cost of n elements at unit speed: linear, nlogn or n2 [default: speed functions].
        #[arg(long)]
        cost: Option<String>,
        /// Print the partition as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Reproduce the report's experiments (section 5) on emulated local
    /// workers, or on a cluster with --cluster/--workers.
    Experiment(Box<ExperimentArgs>),
    /// Draw an SVG Gantt chart of a trace written by `dls run --trace`.
    Gantt {
        /// Trace file written by `dls run --trace` (Chrome trace-event JSON).
        trace: PathBuf,
        /// Where to write the SVG chart.
        #[arg(short = 'o', long)]
        output: PathBuf,
    },
    /// Run the whole thing on this machine: 4 emulated workers, calibration,
    /// one batch under several strategies, predicted against measured.
    Demo {
        /// Demo platform file [default: the built-in configs/demo.toml].
        #[arg(long)]
        config: Option<PathBuf>,
        /// Where to write demo-trace.json and demo-gantt.svg.
        #[arg(long, default_value = ".")]
        out_dir: PathBuf,
        /// Print the comparison as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExperimentKind {
    Linearity,
    Heuristics,
    Participation,
    Baselines,
    /// `rounds` with and without online correction, a worker slowed 3×
    /// halfway through its part (emulated workers only).
    Adapt,
    /// One --size×--size product: the heterogeneous distribution against
    /// its homogeneous prototype, on the same star and on the equivalent
    /// homogeneous one (emulated workers; --speeds, default the paper's).
    Product,
}

#[derive(Debug, clap::Args)]
pub struct ExperimentArgs {
    /// Which experiment: linearity, heuristics, participation, baselines, adapt or product.
    #[arg(value_enum)]
    pub kind: ExperimentKind,
    /// Cluster file: run on these workers instead of emulated local ones.
    #[arg(long, conflicts_with = "workers")]
    pub cluster: Option<PathBuf>,
    /// Comma-separated host:port list instead of a cluster file.
    #[arg(long)]
    pub workers: Option<String>,
    /// File holding the shared token (else the DLS_TOKEN environment variable).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Matrix size n.
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Products per run.
    #[arg(long, default_value_t = 200)]
    pub batch: usize,
    /// Random platforms per family (heuristics; repetitions on a cluster).
    #[arg(long, default_value_t = 3)]
    pub platforms: usize,
    /// Emulated workers per platform (heuristics, linearity).
    #[arg(long, default_value_t = 4)]
    pub count: usize,
    /// Seed of the random platforms and batches.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs of each method per platform (adapt).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Directory for KIND.json, KIND.csv and KIND.svg.
    #[arg(long, default_value = "experiments")]
    pub out: PathBuf,
    /// Add the rows to those already in OUT/KIND.json (platforms numbered on).
    #[arg(long)]
    pub append: bool,
    /// Run nothing: write the CSV, SVG and table again from OUT/KIND.json.
    #[arg(long, conflicts_with_all = ["append", "cluster", "workers"])]
    pub replot: bool,
    /// On a cluster: the family its platform was drawn from (heuristics label).
    #[arg(long, value_enum)]
    pub family: Option<crate::experiments::Family>,
    /// On a cluster: the speeds it was built from, COMM:COMP per worker, comma-separated (label);
    /// for product, the emulated star's speeds.
    #[arg(long)]
    pub speeds: Option<String>,
    /// On a cluster: the x of section 5.3.4's platform it was built from (participation).
    #[arg(long)]
    pub x: Option<f64>,
    /// Print the rows as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub workers: Workers,
    /// Fail if any worker cannot be reached or calibrated (by default it is
    /// left out, with a warning, and the batch runs on the others).
    #[arg(long)]
    pub require_all: bool,
    /// Number of products M (inferred from --input when given).
    #[arg(long)]
    pub batch: Option<usize>,
    /// The products (inferred from --input when given; checked against it
    /// when both are).
    #[command(flatten)]
    pub products: Products,
    /// Which schedule: best (every one-round family and rounds, the fastest predicted),
    /// fifo, lifo, inc-c, inc-w (one round, sends in that order), rounds (multi-round).
    #[arg(long, default_value = "best", value_parser = strategy_parser())]
    pub strategy: Strategy,
    #[arg(long, default_value = "measured", value_parser = ports_parser(), help = PORTS_HELP)]
    pub ports: PortsChoice,
    /// Behind a shared uplink, never hold a worker's sends below its link's rate
    /// (by default sends may be paced so that they fit beside a faster link's).
    #[arg(long)]
    pub no_pace: bool,
    /// Whole-product rounding of the rational loads: paper (the report's) or refined (also moves single products).
    #[arg(long, value_enum, default_value = "refined")]
    pub rounding: RoundingArg,
    /// Platform file with the workers' costs [default: from the cluster file, else calibrate first].
    #[arg(long)]
    pub platform: Option<PathBuf>,
    /// A and B as .npy files: A of shape (M, n, k), B of shape (M, k, m),
    /// or (k, m) for one B shared by every product; float32 or float64.
    #[arg(long, num_args = 2, value_names = ["A.npy", "B.npy"])]
    pub input: Option<Vec<PathBuf>>,
    /// Write C as a .npy file of shape (M, n, m), in batch order, in the inputs' type.
    /// Resumable: if the master dies or is stopped, the same command again
    /// computes only the products missing.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// With --output: ignore and remove what an earlier run of it left, and start over.
    #[arg(long, requires = "output")]
    pub restart: bool,
    /// Seed of the random inputs (and of the products chosen for --verify).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Products the master recomputes to check the results.
    #[arg(long, default_value_t = 3)]
    pub verify: usize,
    /// Write a Chrome trace-event JSON file (Perfetto, chrome://tracing).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write an SVG Gantt chart, measured above predicted.
    #[arg(long)]
    pub gantt: Option<PathBuf>,
    /// Give up on a worker this many times later than its predicted compute
    /// end (plus a second) and redo its products elsewhere.
    #[arg(long)]
    pub straggler: Option<f64>,
    /// With --strategy rounds: keep the planned chunk sizes instead of
    /// resizing the rounds not yet sent from the speeds measured so far.
    #[arg(long)]
    pub no_adapt: bool,
    /// Learn the workers' costs from this run, and plan with what earlier
    /// runs taught (model next to the cluster file, or --model).
    #[arg(long)]
    pub learn: bool,
    /// Model file to learn into and plan from [default: CLUSTER.model-KEY.json, KEY naming the products: 256, 64x48x32-float32, ...].
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Largest chunk sent at once, in MiB of A and B (at least 1): the
    /// master holds about one chunk's inputs and one chunk's results at a time.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub chunk_mb: u64,
    /// One large product rather than a batch: A n×k by B k×m of --size or
    /// --shape, random (with --input, two 2-D files make one product
    /// without this flag).
    #[arg(long, conflicts_with_all = ["batch", "shared_b", "strategy", "learn", "restart"])]
    pub product: bool,
    /// One product: how C is shared, heterogeneous (rectangles in
    /// proportion to the workers' speeds) or homogeneous (equal ones, the
    /// prototype to compare against).
    #[arg(long, value_enum, default_value = "heterogeneous")]
    pub distribution: DistributionArg,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How one product's C is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DistributionArg {
    Heterogeneous,
    Homogeneous,
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

/// The shared token: `--token-file`, else `DLS_TOKEN`, else the cluster
/// file's `token_file`, else none.
pub(crate) fn token_of(
    flag: Option<&std::path::Path>,
    cluster: Option<&crate::config::cluster::Cluster>,
) -> Result<Option<dls_protocol::Token>> {
    crate::session::token(flag, cluster)
}

pub(crate) fn cluster_of(w: &Workers) -> Result<crate::config::cluster::Cluster> {
    if w.worker_port.is_some() && !w.slurm {
        anyhow::bail!("--worker-port goes with --slurm (with --workers, write host:port)");
    }
    let c = match (&w.cluster, &w.workers) {
        (Some(path), _) => crate::config::cluster::Cluster::load(path)?,
        (None, Some(list)) => crate::config::cluster::Cluster::from_list(list)?,
        (None, None) if w.slurm => {
            crate::config::cluster::Cluster::from_hosts(&crate::session::slurm_hosts()?, w.worker_port.unwrap_or(7070))?
        }
        (None, None) => anyhow::bail!("give the workers with --cluster FILE, --workers host:port,... or --slurm"),
    };
    c.check_distinct()?;
    Ok(c)
}

#[cfg(test)]
mod help_tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn every_option_of_every_command_says_what_it_is() {
        let missing = dls_common::undocumented(&Cli::command());
        assert!(missing.is_empty(), "options without help:\n{}", missing.join("\n"));
    }
}
