//! Platform files (TOML): one `[[worker]]` table per worker with its costs.
//!
//! ```toml
//! [[worker]]
//! name = "node1"
//! c = 0.002      # seconds to send one unit
//! w = 0.010      # seconds to compute one unit
//! d = 0.001      # seconds to return one unit
//! max_load = 400 # optional
//! # optional, seconds per message (zero when absent):
//! send_latency = 0.0001
//! compute_latency = 0.00002
//! return_latency = 0.0001
//! ```

use anyhow::{bail, Context, Result};
use dls_lp::{Latency, Platform, Worker};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkerEntry {
    pub name: String,
    pub c: f64,
    pub w: f64,
    pub d: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_load: Option<u64>,
    /// Seconds per message (the affine costs' intercepts); zero when absent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub send_latency: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compute_latency: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub return_latency: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct PlatformFile {
    /// The matrix size n the costs were measured for (`dls calibrate`
    /// writes it); costs do not carry over to another size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    #[serde(default)]
    pub worker: Vec<WorkerEntry>,
}

impl PlatformFile {
    pub fn parse(text: &str, origin: &str) -> Result<Platform> {
        Ok(Self::parse_sized(text, origin)?.0)
    }

    /// The platform and the matrix size it was measured for, if it says.
    pub fn parse_sized(text: &str, origin: &str) -> Result<(Platform, Option<usize>)> {
        let file: PlatformFile =
            toml::from_str(text).with_context(|| format!("{origin}: not a valid platform file"))?;
        if file.worker.is_empty() {
            bail!("{origin}: no [[worker]] table: a platform file lists at least one worker");
        }
        if file.size == Some(0) {
            bail!("{origin}: size = 0: the matrix size is at least 1");
        }
        let size = file.size;
        let p = file
            .into_platform()
            .with_context(|| format!("{origin}: invalid platform"))?;
        Ok((p, size))
    }

    pub fn load(path: &Path) -> Result<Platform> {
        Ok(Self::load_sized(path)?.0)
    }

    pub fn load_sized(path: &Path) -> Result<(Platform, Option<usize>)> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading platform file {}", path.display()))?;
        Self::parse_sized(&text, &path.display().to_string())
    }

    /// The platform of `path` for a batch of n×n products: refused, with
    /// the command that measures it again, when the file says it was
    /// measured for another size (costs do not scale simply with n: caches
    /// change the speed). A file that names no size is taken as it is.
    pub fn load_for(path: &Path, n: usize) -> Result<Platform> {
        let (p, size) = Self::load_sized(path)?;
        match size {
            Some(s) if s != n => bail!(
                "{} holds costs measured for {s}×{s} products, but this batch is {n}×{n}; measure them again with `dls calibrate --size {n} -o {}` (or leave out --platform to calibrate now)",
                path.display(),
                path.display()
            ),
            _ => Ok(p),
        }
    }

    pub fn into_platform(self) -> Result<Platform> {
        let workers = self
            .worker
            .into_iter()
            .map(|w| Worker {
                name: w.name,
                c: w.c,
                w: w.w,
                d: w.d,
                max_load: w.max_load,
                latency: Latency {
                    send: w.send_latency,
                    compute: w.compute_latency,
                    ret: w.return_latency,
                },
            })
            .collect();
        Ok(Platform::new(workers)?)
    }

    pub fn from_platform(p: &Platform) -> Self {
        PlatformFile {
            size: None,
            worker: p
                .workers()
                .iter()
                .map(|w| WorkerEntry {
                    name: w.name.clone(),
                    c: w.c,
                    w: w.w,
                    d: w.d,
                    max_load: w.max_load,
                    send_latency: w.latency.send,
                    compute_latency: w.latency.compute,
                    return_latency: w.latency.ret,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        format!("{:#}", PlatformFile::parse(text, "p.toml").expect_err("must fail"))
    }

    #[test]
    fn a_file_measured_at_one_size_is_refused_at_another() {
        let dir = std::env::temp_dir().join(format!("dls-platform-size-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let sized = dir.join("sized.toml");
        let text = "size = 128\n\n[[worker]]\nname = \"a\"\nc = 0.002\nw = 0.01\nd = 0.001\n";
        std::fs::write(&sized, text).expect("writes");
        PlatformFile::load_for(&sized, 128).expect("the size it was measured for");
        let e = format!("{:#}", PlatformFile::load_for(&sized, 256).expect_err("another size"));
        assert!(e.contains("128×128") && e.contains("dls calibrate --size 256"), "{e}");
        let plain = dir.join("plain.toml");
        std::fs::write(&plain, text.replace("size = 128\n", "")).expect("writes");
        PlatformFile::load_for(&plain, 256).expect("a file that names no size");
        // What calibration writes says its size and reads back the same.
        let mut f = PlatformFile::from_platform(&PlatformFile::load(&sized).expect("loads"));
        f.size = Some(64);
        let back = PlatformFile::parse_sized(&toml::to_string(&f).expect("serialises"), "x").expect("parses");
        assert_eq!(back.1, Some(64));
        assert!(err("size = 0\n[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\n").contains("size = 0"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn parses_the_documented_example() {
        let p = PlatformFile::parse(
            "[[worker]]\nname = \"node1\"\nc = 0.002\nw = 0.010\nd = 0.001\nmax_load = 400\n\n[[worker]]\nname = \"n2\"\nc = 1\nw = 2\nd = 0\n",
            "p.toml",
        )
        .expect("valid");
        assert_eq!(p.len(), 2);
        assert_eq!(p.workers()[0].max_load, Some(400));
        assert_eq!(p.workers()[1].c, 1.0);
    }

    #[test]
    fn errors_name_file_and_field() {
        assert!(err("[[worker]]\nname = \"a\"\nw = 1\nd = 1\n").contains("missing field `c`"));
        assert!(err("[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\nspeed = 3\n").contains("unknown field `speed`"));
        assert!(err("[[worker]]\nname = \"a\"\nc = -1\nw = 1\nd = 1\n").contains("`c` = -1"));
        assert!(err("").contains("no [[worker]]"));
        assert!(err("[[worker]\n").contains("p.toml"));
        let dup = "[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\n";
        assert!(err(&format!("{dup}{dup}")).contains("used by another worker"));
        assert!(err("[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\nmax_load = -3\n").contains("max_load"));
    }
}
