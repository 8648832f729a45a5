//! The `dls` command line: [`args`] holds the clap types, the other modules
//! what each subcommand does; [`run`] dispatches. Nothing outside this
//! folder imports from it.

pub mod args;
pub mod commands;
pub mod console;
pub mod experiment_cmd;
pub mod outputs;
pub mod partition_cmd;
pub mod product_cmd;
pub mod run_cmd;

use crate::config::platform_file::PlatformFile;
use crate::output::plan_report::{self, PlanJson};
use anyhow::{Context, Result};
use args::{Cli, Command, RoundingArg};
use dls_lp::{Request, Rounding};

/// The `dls` binary: parse, start logging, run, report the error.
pub fn main() -> std::process::ExitCode {
    use clap::Parser;
    let cli = Cli::parse();
    // Warnings (a worker lost, say) by default; RUST_LOG for more. Colour
    // only on a terminal, never with NO_COLOR.
    dls_common::init_logging("warn", cli.log_format);
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Status { workers, json, wait } => commands::status(&workers, json, wait),
        Command::Calibrate {
            workers,
            products,
            sizes,
            output,
            json,
            require_all,
        } => commands::calibrate(&workers, &products, sizes.as_deref(), &output, json, require_all),
        Command::Run(args) => run_cmd::run(&args),
        Command::Partition {
            speeds,
            elements,
            cost,
            json,
        } => partition_cmd::run(&speeds, elements, cost.as_deref(), json),
        Command::Experiment(args) => experiment_cmd::run(&args),
        Command::Gantt { trace, output } => commands::gantt(&trace, &output),
        Command::Demo { config, out_dir, json } => commands::demo(config.as_deref(), &out_dir, json),
        Command::Plan {
            platform,
            load,
            products,
            strategy,
            ports,
            no_pace,
            rounding,
            json,
        } => {
            let given = products.shape()?.is_some() || products.dtype.is_some() || products.shared_b;
            let plat = match given {
                false => PlatformFile::load(&platform)?,
                true => {
                    let (_, measured) = PlatformFile::load_sized(&platform)?;
                    // Unsaid parts of the products are the file's own.
                    let base = measured.unwrap_or(dls_protocol::Form::square(128));
                    let form = dls_protocol::Form {
                        shape: products.shape()?.map_or(base.shape, |s| s.0),
                        dtype: products.dtype.unwrap_or(base.dtype),
                        shared_b: products.shared_b || base.shared_b,
                    };
                    let (p, note) = PlatformFile::load_for(&platform, &form)?;
                    if let Some(n) = note {
                        eprintln!("note: {n}");
                    }
                    p
                }
            };
            let ports = ports.on(&plat);
            let plat = plat.for_ports(ports);
            let req = Request {
                load,
                strategy,
                ports,
                rounding: match rounding {
                    RoundingArg::Paper => Rounding::Paper,
                    RoundingArg::Refined => Rounding::Refined,
                },
            };
            // The equivalent homogeneous platform's plan beside the plan
            // itself: the user waits for both.
            let (plan, efficiency) = dls_lp::paced::plan_weighed(&plat, &req, !no_pace)
                .with_context(|| format!("planning {load} units on {}", platform.display()))?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&PlanJson::new(&plat, &plan, efficiency))?
                );
            } else {
                print!("{}", plan_report::table(&plat, &plan, efficiency));
            }
            Ok(())
        }
    }
}
