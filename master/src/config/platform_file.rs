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
//! # optional (`dls calibrate --sizes`): costs for products of other sizes
//! send_per_byte = 1.2e-9
//! return_per_byte = 1.1e-9
//! speed = [[64.0, 9.5e9], [256.0, 2.1e10]]   # [equivalent n, flop/s]
//!
//! # optional (`dls calibrate` writes it when the master's transfers share
//! # one uplink): seconds of the uplink a unit takes each way, and whether
//! # a send and a return cross it at once. Without it, one port.
//! [uplink]
//! send = 0.0008
//! ret = 0.0004
//! duplex = true
//! ```

use crate::config::scaling::Scaling;
use anyhow::{bail, Context, Result};
use dls_lp::{Latency, Platform, Worker};
use dls_protocol::{DType, Form, Shape};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The largest factor under load a platform file may hold (calibration
/// never writes more).
pub const MAX_UNDER_LOAD: f64 = 1e6;

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
    /// Factors (send, compute, return) that c, w and d include for the
    /// worker receiving, computing and returning at once (`dls calibrate`
    /// with two lanes); taken out again for one port (`--ports 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_load: Option<[f64; 3]>,
    /// How many times longer the worker's return takes while the master
    /// sends it a chunk (two lanes); none: no longer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_receiving: Option<f64>,
    /// The scaling model (`dls calibrate --sizes`): seconds per byte each
    /// way and computing speed by size; see [`crate::config::scaling`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_per_byte: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_per_byte: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<Vec<[f64; 2]>>,
}

impl WorkerEntry {
    /// The worker's scaling model, when the file has one for it.
    pub fn scaling(&self) -> Result<Option<Scaling>> {
        let (Some(s), Some(r), Some(speed)) = (self.send_per_byte, self.return_per_byte, &self.speed) else {
            if self.send_per_byte.is_some() || self.return_per_byte.is_some() || self.speed.is_some() {
                bail!(
                    "worker {:?}: send_per_byte, return_per_byte and speed go together (`dls calibrate --sizes` writes them)",
                    self.name
                );
            }
            return Ok(None);
        };
        let scaling = Scaling {
            send_per_byte: s,
            return_per_byte: r,
            speed: speed.iter().map(|p| (p[0], p[1])).collect(),
        };
        scaling.validate(&self.name)?;
        Ok(Some(scaling))
    }

    pub fn set_scaling(&mut self, s: &Scaling) {
        self.send_per_byte = Some(s.send_per_byte);
        self.return_per_byte = Some(s.return_per_byte);
        self.speed = Some(s.speed.iter().map(|&(n, v)| [n, v]).collect());
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The `[uplink]` table: what the master's shared uplink costs a unit.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UplinkEntry {
    pub send: f64,
    pub ret: f64,
    pub duplex: bool,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink: Option<UplinkEntry>,
}

impl PlatformFile {
    pub fn parse(text: &str, origin: &str) -> Result<Platform> {
        Ok(Self::parse_sized(text, origin)?.0)
    }

    /// The platform and the products it was measured for, if it says.
    pub fn parse_sized(text: &str, origin: &str) -> Result<(Platform, Option<Form>)> {
        let (file, form) = Self::parse_file(text, origin)?;
        Ok((file.platform(origin)?, form))
    }

    /// The file as written, with the products it was measured for.
    fn parse_file(text: &str, origin: &str) -> Result<(PlatformFile, Option<Form>)> {
        let file: PlatformFile =
            toml::from_str(text).with_context(|| format!("{origin}: not a valid platform file"))?;
        if file.worker.is_empty() {
            bail!("{origin}: no [[worker]] table: a platform file lists at least one worker");
        }
        let form = file.form().with_context(|| origin.to_string())?;
        Ok((file, form))
    }

    fn platform(&self, origin: &str) -> Result<Platform> {
        self.clone()
            .into_platform()
            .with_context(|| format!("{origin}: invalid platform"))
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

    /// The platform of `path` for a batch of `form`, and a note when its
    /// costs were rescaled. A file measured for other products serves only
    /// through its scaling model (`dls calibrate --sizes`), and for the
    /// same type; otherwise it is refused, with the command that measures
    /// it again (costs do not scale simply with the size: caches change
    /// the speed). A file that names no products is taken as it is.
    pub fn load_for(path: &Path, form: &Form) -> Result<(Platform, Option<String>)> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading platform file {}", path.display()))?;
        let origin = path.display().to_string();
        let (file, measured) = Self::parse_file(&text, &origin)?;
        let p = file.platform(&origin)?;
        let Some(m) = measured.filter(|m| m != form) else {
            return Ok((p, None));
        };
        let again = || {
            format!(
                "measure them again with `dls calibrate {} -o {}`, or at several sizes with `--sizes` (or leave out --platform to calibrate now)",
                calibrate_flags(form),
                path.display()
            )
        };
        let models = file
            .worker
            .iter()
            .map(|w| w.scaling())
            .collect::<Result<Vec<_>>>()
            .with_context(|| origin.clone())?;
        if m.dtype != form.dtype {
            bail!(
                "{origin} holds costs measured for {} products, but this batch is {}: {}",
                m.dtype,
                form.dtype,
                again()
            );
        }
        if models.iter().any(Option::is_none) {
            bail!(
                "{origin} holds costs measured for products of {m}, but this batch is {form}, and the file has no model of how costs follow the size: {}",
                again()
            );
        }
        let workers = p
            .workers()
            .iter()
            .zip(models.iter().flatten())
            .map(|(w, s)| s.worker_for(w, form))
            .collect();
        let note = format!(
            "{origin} was measured for products of {m}: costs rescaled to {form} (bytes by the links' rates, flops by each worker's speed at that size)"
        );
        // The uplink carries bytes: its cost a unit follows their count.
        let uplink = p.uplink().map(|u| dls_lp::Uplink {
            send: u.send * form.in_bytes(1) as f64 / m.in_bytes(1) as f64,
            ret: u.ret * form.out_bytes(1) as f64 / m.out_bytes(1) as f64,
            duplex: u.duplex,
        });
        Ok((Platform::new(workers)?.with_uplink(uplink), Some(note)))
    }

    pub fn into_platform(self) -> Result<Platform> {
        for w in &self.worker {
            if let Some(f) = w.under_load {
                if !f.iter().all(|x| x.is_finite() && (1.0..=MAX_UNDER_LOAD).contains(x)) {
                    bail!(
                        "worker {:?}: under_load must be three factors from 1 to {MAX_UNDER_LOAD:e} (send, compute, return), got {f:?}",
                        w.name
                    );
                }
            }
        }
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
                under_load: w.under_load,
                return_receiving: w.return_receiving,
            })
            .collect();
        let uplink = match self.uplink {
            Some(u) => Some(dls_lp::Uplink::new(u.send, u.ret, u.duplex)?),
            None => None,
        };
        Ok(Platform::new(workers)?.with_uplink(uplink))
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
                    under_load: w.under_load,
                    return_receiving: w.return_receiving,
                    send_per_byte: None,
                    return_per_byte: None,
                    speed: None,
                })
                .collect(),
            uplink: p.uplink().map(|u| UplinkEntry {
                send: u.send,
                ret: u.ret,
                duplex: u.duplex,
            }),
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
        assert!(PlatformFile::load_for(&sized, &Form::square(128))
            .expect("same")
            .1
            .is_none());
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
            e.contains("float64 products, but this batch is float32")
                && e.contains("dls calibrate --shape 128,64,128 --dtype float32 --shared-b"),
            "{e}"
        );
        let plain = dir.join("plain.toml");
        std::fs::write(&plain, text.replace("size = 128\n", "")).expect("writes");
        PlatformFile::load_for(&plain, &Form::square(256)).expect("a file that names no size");
        // With a scaling model, another size of the same type is served,
        // with costs recomputed from bytes and the speed at that size.
        let scaled = dir.join("scaled.toml");
        let model = "send_per_byte = 1e-9\nreturn_per_byte = 2e-9\nspeed = [[64.0, 1e9], [256.0, 4e9]]\n";
        std::fs::write(&scaled, format!("{text}send_latency = 0.001\n{model}")).expect("writes");
        let (p, note) = PlatformFile::load_for(&sized, &Form::square(128)).expect("same size");
        assert!(note.is_none() && p.workers()[0].c == 0.002);
        let (p, note) = PlatformFile::load_for(&scaled, &Form::square(256)).expect("rescaled");
        assert!(note.expect("says so").contains("rescaled to 256×256 float64"));
        let w = &p.workers()[0];
        assert!((w.c - 2.0 * 256.0 * 256.0 * 8.0 * 1e-9).abs() < 1e-15, "{}", w.c);
        assert!((w.d - 256.0 * 256.0 * 8.0 * 2e-9).abs() < 1e-15, "{}", w.d);
        assert!((w.w - 2.0 * 256f64.powi(3) / 4e9).abs() < 1e-12, "{}", w.w);
        assert_eq!(w.latency.send, 0.001, "latencies are kept");
        // Not across types, and not with half a model.
        let f32_form = Form {
            dtype: DType::F32,
            ..Form::square(256)
        };
        let e = format!(
            "{:#}",
            PlatformFile::load_for(&scaled, &f32_form).expect_err("another type")
        );
        assert!(e.contains("--dtype float32"), "{e}");
        std::fs::write(&scaled, format!("{text}send_per_byte = 1e-9\n")).expect("writes");
        let e = format!(
            "{:#}",
            PlatformFile::load_for(&scaled, &Form::square(256)).expect_err("half")
        );
        assert!(e.contains("go together"), "{e}");
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
        assert!(err(&format!("dtype = \"float32\"\n{w}")).contains("dtype or shared_b without shape"));
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
        assert!(
            err("[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\nvelocity = 3\n").contains("unknown field `velocity`")
        );
        assert!(err("[[worker]]\nname = \"a\"\nc = -1\nw = 1\nd = 1\n").contains("`c` = -1"));
        assert!(err("").contains("no [[worker]]"));
        assert!(err("[[worker]\n").contains("p.toml"));
        let dup = "[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\n";
        assert!(err(&format!("{dup}{dup}")).contains("used by another worker"));
        assert!(err("[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\nmax_load = -3\n").contains("max_load"));
    }

    #[test]
    fn the_uplink_is_kept_and_older_files_are_one_port() {
        let one = "[[worker]]\nname = \"a\"\nc = 0.002\nw = 0.01\nd = 0.001\n";
        let old = PlatformFile::parse(one, "p.toml").expect("valid");
        assert_eq!((old.uplink(), old.measured_ports()), (None, dls_lp::Ports::One));
        let text = format!("{one}\n[uplink]\nsend = 0.0005\nret = 0.00025\nduplex = true\n");
        let p = PlatformFile::parse(&text, "p.toml").expect("valid");
        let u = dls_lp::Uplink::new(0.0005, 0.00025, true).expect("valid");
        assert_eq!(p.measured_ports(), dls_lp::Ports::Shared(u));
        // Written back, read again: the same.
        let back = toml::to_string(&PlatformFile::from_platform(&p)).expect("writes");
        assert_eq!(PlatformFile::parse(&back, "q.toml").expect("reads"), p);
        let bad = format!("{one}\n[uplink]\nsend = 0\nret = 1\nduplex = false\n");
        assert!(err(&bad).contains("uplink send"), "{}", err(&bad));
        let missing = format!("{one}\n[uplink]\nsend = 1\nret = 1\n");
        assert!(err(&missing).contains("duplex"), "{}", err(&missing));
    }

    #[test]
    fn a_return_slowed_while_receiving_is_kept_and_checked() {
        let one = "[[worker]]\nname = \"a\"\nc = 0.002\nw = 0.01\nd = 0.001\n";
        assert_eq!(
            PlatformFile::parse(one, "p.toml").expect("valid").workers()[0].return_receiving,
            None,
            "older files: no slowdown"
        );
        let text = format!("{one}return_receiving = 1.8\n");
        let p = PlatformFile::parse(&text, "p.toml").expect("valid");
        assert_eq!(p.workers()[0].return_receiving, Some(1.8));
        assert!((p.workers()[0].return_speed_receiving() - 1.0 / 1.8).abs() < 1e-15);
        let back = toml::to_string(&PlatformFile::from_platform(&p)).expect("writes");
        assert_eq!(PlatformFile::parse(&back, "q.toml").expect("reads"), p);
        for bad in ["0.5", "nan", "2e7"] {
            let e = err(&format!("{one}return_receiving = {bad}\n"));
            assert!(e.contains("return_receiving") && e.contains(">= 1"), "{e}");
        }
    }

    #[test]
    fn the_uplink_follows_the_bytes_of_other_products() {
        let dir = std::env::temp_dir().join(format!("dls-platform-uplink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("p.toml");
        let text = "shape = [64, 64, 64]\n\n[[worker]]\nname = \"a\"\nc = 0.002\nw = 0.01\nd = 0.001\n\
                    send_per_byte = 1e-8\nreturn_per_byte = 1e-8\nspeed = [[64.0, 1e9]]\n\n\
                    [uplink]\nsend = 0.001\nret = 0.0005\nduplex = true\n";
        std::fs::write(&path, text).expect("write");
        let (p, note) = PlatformFile::load_for(&path, &Form::square(128)).expect("rescaled");
        assert!(note.is_some());
        let u = p.uplink().expect("kept");
        // Four times the bytes each way.
        assert!(
            (u.send - 0.004).abs() < 1e-12 && (u.ret - 0.002).abs() < 1e-12 && u.duplex,
            "{u:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
