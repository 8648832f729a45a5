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
use dls_protocol::{DType, Form, Shape};
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
    /// The square size n the costs were measured for (files of square
    /// float64 products before `shape` existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// The products the costs were measured for (`dls calibrate` writes
    /// them): shape [n, k, m], type, and whether one B was shared; costs
    /// do not carry over to other products.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_b: bool,
    #[serde(default)]
    pub worker: Vec<WorkerEntry>,
}

impl PlatformFile {
    pub fn parse(text: &str, origin: &str) -> Result<Platform> {
        Ok(Self::parse_sized(text, origin)?.0)
    }

    /// The platform and the products it was measured for, if it says.
    pub fn parse_sized(text: &str, origin: &str) -> Result<(Platform, Option<Form>)> {
        let file: PlatformFile =
            toml::from_str(text).with_context(|| format!("{origin}: not a valid platform file"))?;
        if file.worker.is_empty() {
            bail!("{origin}: no [[worker]] table: a platform file lists at least one worker");
        }
        let form = file.form().with_context(|| origin.to_string())?;
        let p = file
            .into_platform()
            .with_context(|| format!("{origin}: invalid platform"))?;
        Ok((p, form))
    }

    /// The products the file says its costs were measured for.
    pub fn form(&self) -> Result<Option<Form>> {
        let dtype = match &self.dtype {
            None => DType::F64,
            Some(d) => DType::parse(d).with_context(|| format!("dtype = {d:?}: float32 or float64"))?,
        };
        let shape = match (self.size, self.shape) {
            (Some(_), Some(_)) => bail!("size and shape both given: keep shape = [n, k, m]"),
            (Some(0), _) => bail!("size = 0: the matrix size is at least 1"),
            (Some(n), None) => Shape::square(u32::try_from(n).context("size is too large")?),
            (None, Some([n, k, m])) if n == 0 || k == 0 || m == 0 => {
                bail!("shape = [{n}, {k}, {m}]: every dimension is at least 1")
            }
            (None, Some([n, k, m])) => Shape { n, k, m },
            (None, None) if self.dtype.is_some() || self.shared_b => bail!("dtype or shared_b without shape"),
            (None, None) => return Ok(None),
        };
        Ok(Some(Form {
            shape,
            dtype,
            shared_b: self.shared_b,
        }))
    }

    /// Say in the file which products its costs were measured for.
    pub fn set_form(&mut self, form: &Form) {
        let s = form.shape;
        self.size = None;
        self.shape = Some([s.n, s.k, s.m]);
        self.dtype = Some(form.dtype.name().to_string());
        self.shared_b = form.shared_b;
    }

    pub fn load(path: &Path) -> Result<Platform> {
        Ok(Self::load_sized(path)?.0)
    }

    pub fn load_sized(path: &Path) -> Result<(Platform, Option<Form>)> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading platform file {}", path.display()))?;
        Self::parse_sized(&text, &path.display().to_string())
    }

    /// The platform of `path` for a batch of `form`: refused, with the
    /// command that measures it again, when the file says it was measured
    /// for other products (costs do not scale simply with the size: caches
    /// change the speed). A file that names no products is taken as it is.
    pub fn load_for(path: &Path, form: &Form) -> Result<Platform> {
        let (p, measured) = Self::load_sized(path)?;
        match measured {
            Some(m) if m != *form => bail!(
                "{} holds costs measured for products of {m}, but this batch is {form}; measure them again with `dls calibrate {} -o {}` (or leave out --platform to calibrate now)",
                path.display(),
                calibrate_flags(form),
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
            shape: None,
            dtype: None,
            shared_b: false,
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

/// The `dls calibrate` flags that measure products of `form`.
pub fn calibrate_flags(form: &Form) -> String {
    let s = form.shape;
    let mut out = match s.is_square() {
        true => format!("--size {}", s.n),
        false => format!("--shape {},{},{}", s.n, s.k, s.m),
    };
    if form.dtype != DType::F64 {
        out.push_str(&format!(" --dtype {}", form.dtype));
    }
    if form.shared_b {
        out.push_str(" --shared-b");
    }
    out
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
        PlatformFile::load_for(&sized, &Form::square(128)).expect("the size it was measured for");
        let e = format!(
            "{:#}",
            PlatformFile::load_for(&sized, &Form::square(256)).expect_err("another size")
        );
        assert!(
            e.contains("128×128 float64") && e.contains("dls calibrate --size 256"),
            "{e}"
        );
        let rect = Form {
            shape: Shape { n: 128, k: 64, m: 128 },
            dtype: DType::F32,
            shared_b: true,
        };
        let e = format!("{:#}", PlatformFile::load_for(&sized, &rect).expect_err("another form"));
        assert!(
            e.contains("this batch is 128×64·64×128 float32, one shared B")
                && e.contains("dls calibrate --shape 128,64,128 --dtype float32 --shared-b"),
            "{e}"
        );
        let plain = dir.join("plain.toml");
        std::fs::write(&plain, text.replace("size = 128\n", "")).expect("writes");
        PlatformFile::load_for(&plain, &Form::square(256)).expect("a file that names no size");
        // What calibration writes says its products and reads back the same.
        let mut f = PlatformFile::from_platform(&PlatformFile::load(&sized).expect("loads"));
        f.set_form(&rect);
        let back = PlatformFile::parse_sized(&toml::to_string(&f).expect("serialises"), "x").expect("parses");
        assert_eq!(back.1, Some(rect));
        assert!(err("size = 0\n[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\n").contains("size = 0"));
        let w = "[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\n";
        assert!(err(&format!("shape = [2, 0, 3]\n{w}")).contains("every dimension is at least 1"));
        assert!(err(&format!("shape = [2, 1, 3]\ndtype = \"int8\"\n{w}")).contains("float32 or float64"));
        assert!(err(&format!("size = 4\nshape = [4, 4, 4]\n{w}")).contains("size and shape both given"));
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
