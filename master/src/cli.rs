//! The `dls` command line.

use crate::plan_report::{self, PlanJson};
use crate::platform_file::PlatformFile;
use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use dls_lp::{Ports, Request, Rounding, Strategy};
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
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StrategyArg {
    Fifo,
    Lifo,
    IncC,
    IncW,
    Best,
}

impl From<StrategyArg> for Strategy {
    fn from(s: StrategyArg) -> Strategy {
        match s {
            StrategyArg::Fifo => Strategy::Fifo,
            StrategyArg::Lifo => Strategy::Lifo,
            StrategyArg::IncC => Strategy::IncC,
            StrategyArg::IncW => Strategy::IncW,
            StrategyArg::Best => Strategy::Best,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoundingArg {
    Paper,
    Refined,
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
        #[arg(long, value_enum, default_value = "fifo")]
        strategy: StrategyArg,
        /// 1: the master takes part in one transfer at a time; 2: it may send and receive at once.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
        ports: u8,
        #[arg(long, value_enum, default_value = "refined")]
        rounding: RoundingArg,
        /// Print the plan as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Plan {
            platform,
            load,
            strategy,
            ports,
            rounding,
            json,
        } => {
            let plat = PlatformFile::load(&platform)?;
            let req = Request {
                load,
                strategy: strategy.into(),
                ports: if ports == 1 { Ports::One } else { Ports::Two },
                rounding: match rounding {
                    RoundingArg::Paper => Rounding::Paper,
                    RoundingArg::Refined => Rounding::Refined,
                },
            };
            let plan = dls_lp::plan(&plat, &req)
                .with_context(|| format!("planning {load} units on {}", platform.display()))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&PlanJson::new(&plat, &plan))?);
            } else {
                print!("{}", plan_report::table(&plat, &plan));
            }
            Ok(())
        }
    }
}
