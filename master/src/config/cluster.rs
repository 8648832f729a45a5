//! Cluster files: where the workers are, and optionally what they cost.
//!
//! ```toml
//! [[worker]]
//! name = "node1"
//! address = "10.0.0.11:7070"
//! # optional, when known (else `dls run` calibrates):
//! c = 0.002
//! w = 0.010
//! d = 0.001
//! max_load = 400
//! ```

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSpec {
    pub name: String,
    pub address: String,
    #[serde(default)]
    pub c: Option<f64>,
    #[serde(default)]
    pub w: Option<f64>,
    #[serde(default)]
    pub d: Option<f64>,
    #[serde(default)]
    pub max_load: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    #[serde(default)]
    pub worker: Vec<WorkerSpec>,
}

impl Cluster {
    pub fn parse(text: &str, origin: &str) -> Result<Cluster> {
        let c: Cluster = toml::from_str(text).with_context(|| format!("{origin}: not a valid cluster file"))?;
        c.validate(origin)?;
        Ok(c)
    }

    pub fn load(path: &Path) -> Result<Cluster> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading cluster file {}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// `host:port,host:port`; workers are named `w0`, `w1`, ...
    pub fn from_list(list: &str) -> Result<Cluster> {
        let worker = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .enumerate()
            .map(|(i, a)| WorkerSpec {
                name: format!("w{i}"),
                address: a.to_string(),
                c: None,
                w: None,
                d: None,
                max_load: None,
            })
            .collect();
        let c = Cluster { worker };
        c.validate("--workers")?;
        Ok(c)
    }

    fn validate(&self, origin: &str) -> Result<()> {
        if self.worker.is_empty() {
            bail!("{origin}: no worker: list at least one [[worker]] with a name and an address");
        }
        let mut names = HashSet::new();
        let mut addrs = HashSet::new();
        for (i, w) in self.worker.iter().enumerate() {
            if w.name.trim().is_empty() {
                bail!("{origin}: worker #{i} has an empty name");
            }
            if !names.insert(w.name.as_str()) {
                bail!("{origin}: worker name {:?} is used twice", w.name);
            }
            if !w.address.contains(':') {
                bail!(
                    "{origin}: worker {:?}: address {:?} has no port (expected host:port)",
                    w.name,
                    w.address
                );
            }
            if !addrs.insert(w.address.as_str()) {
                bail!(
                    "{origin}: address {:?} is listed twice (workers {:?})",
                    w.address,
                    w.name
                );
            }
            let known = [w.c, w.w, w.d].iter().filter(|x| x.is_some()).count();
            if known != 0 && known != 3 {
                bail!(
                    "{origin}: worker {:?}: give all of c, w and d, or none (to calibrate)",
                    w.name
                );
            }
        }
        Ok(())
    }

    /// The platform, when every worker's costs are in the file.
    pub fn known_platform(&self) -> Option<Result<dls_lp::Platform>> {
        let workers: Option<Vec<_>> = self
            .worker
            .iter()
            .map(|s| {
                Some(dls_lp::Worker {
                    name: s.name.clone(),
                    c: s.c?,
                    w: s.w?,
                    d: s.d?,
                    max_load: s.max_load,
                    latency: dls_lp::Latency::default(),
                })
            })
            .collect();
        workers.map(|w| dls_lp::Platform::new(w).map_err(anyhow::Error::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        format!("{:#}", Cluster::parse(text, "c.toml").expect_err("must fail"))
    }

    #[test]
    fn parses_and_rejects() {
        let ok = Cluster::parse("[[worker]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n", "c.toml").expect("valid");
        assert_eq!(ok.worker.len(), 1);
        assert!(ok.known_platform().is_none());
        assert!(err("").contains("no worker"));
        assert!(err("[[worker]]\nname = \"a\"\n").contains("missing field `address`"));
        assert!(err("[[worker]]\nname = \"a\"\naddress = \"h\"\n").contains("no port"));
        let two = "[[worker]]\nname = \"a\"\naddress = \"h:1\"\n[[worker]]\nname = \"b\"\naddress = \"h:1\"\n";
        assert!(err(two).contains("listed twice"));
        let dup = "[[worker]]\nname = \"a\"\naddress = \"h:1\"\n[[worker]]\nname = \"a\"\naddress = \"h:2\"\n";
        assert!(err(dup).contains("used twice"));
        assert!(err("[[worker]]\nname = \"a\"\naddress = \"h:1\"\nc = 1.0\n").contains("all of c, w and d"));
        assert!(err("[[worker]]\nname = \"a\"\naddress = \"h:1\"\nspeed = 1\n").contains("unknown field"));
        let list = Cluster::from_list("127.0.0.1:1, 127.0.0.1:2").expect("valid");
        assert_eq!(list.worker[1].name, "w1");
        assert!(Cluster::from_list("").is_err());
        assert!(Cluster::from_list("a:1,a:1").is_err());
    }
}
