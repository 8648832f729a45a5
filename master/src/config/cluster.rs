//! Cluster files: where the workers are, and optionally what they cost,
//! with defaults for every command that uses the file.
//!
//! ```toml
//! token_file = "dls-token"   # relative to this file's directory
//! worker_port = 7070         # for addresses written without a port
//!
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
    /// The shared token's file, when `--token-file` and `DLS_TOKEN` give
    /// none (resolved from the cluster file's directory).
    #[serde(default)]
    pub token_file: Option<std::path::PathBuf>,
    /// The port of addresses written without one.
    #[serde(default)]
    pub worker_port: Option<u16>,
    #[serde(default)]
    pub worker: Vec<WorkerSpec>,
}

impl Cluster {
    pub fn parse(text: &str, origin: &str) -> Result<Cluster> {
        let mut c: Cluster = toml::from_str(text).with_context(|| format!("{origin}: not a valid cluster file"))?;
        if let Some(port) = c.worker_port {
            for w in &mut c.worker {
                if !w.address.contains(':') {
                    w.address = format!("{}:{port}", w.address);
                }
            }
        }
        c.validate(origin)?;
        Ok(c)
    }

    pub fn load(path: &Path) -> Result<Cluster> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading cluster file {}", path.display()))?;
        let mut c = Self::parse(&text, &path.display().to_string())?;
        if let (Some(t), Some(dir)) = (&c.token_file, path.parent()) {
            if t.is_relative() {
                c.token_file = Some(dir.join(t));
            }
        }
        Ok(c)
    }

    /// One worker per host at `port`, named by its host (Slurm nodes).
    pub fn from_hosts(hosts: &[String], port: u16) -> Result<Cluster> {
        Self::of(
            hosts.iter().map(|h| (h.clone(), format!("{h}:{port}"))),
            "the Slurm allocation",
        )
    }

    /// `host:port,host:port` (`--workers`); each worker is named by its
    /// address, so names are the same whatever the order of the list.
    pub fn from_list(list: &str) -> Result<Cluster> {
        Self::of(Self::split(list).map(|a| (a.to_string(), a.to_string())), "--workers")
    }

    /// As [`Cluster::from_list`], the workers named `w0`, `w1`, ... in
    /// list order (for programs that name their platforms so).
    pub fn from_list_indexed(list: &str) -> Result<Cluster> {
        let named = Self::split(list)
            .enumerate()
            .map(|(i, a)| (format!("w{i}"), a.to_string()));
        Self::of(named, "--workers")
    }

    fn split(list: &str) -> impl Iterator<Item = &str> {
        list.split(',').map(str::trim).filter(|s| !s.is_empty())
    }

    /// A validated cluster of (name, address) pairs, costs unknown.
    fn of(named: impl Iterator<Item = (String, String)>, origin: &str) -> Result<Cluster> {
        let worker = named
            .map(|(name, address)| WorkerSpec {
                name,
                address,
                c: None,
                w: None,
                d: None,
                max_load: None,
            })
            .collect();
        let c = Cluster {
            token_file: None,
            worker_port: None,
            worker,
        };
        c.validate(origin)?;
        Ok(c)
    }

    fn validate(&self, origin: &str) -> Result<()> {
        if self.worker.is_empty() {
            bail!("{origin}: no worker: list at least one [[worker]] with a name and an address");
        }
        if let Some(Err(e)) = self.known_platform() {
            bail!("{origin}: {e:#}");
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
                    "{origin}: worker {:?}: address {:?} has no port (write host:port, or set worker_port)",
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
    /// Refuse two entries that reach the same worker under different
    /// addresses (`127.0.0.1:7070` and `localhost:7070`): the worker would
    /// take the second for another master and answer "busy". Addresses that
    /// do not resolve are left for the connection to report.
    pub fn check_distinct(&self) -> Result<()> {
        use std::net::ToSocketAddrs;
        let mut seen: Vec<(std::net::SocketAddr, &str)> = Vec::new();
        for w in &self.worker {
            let Ok(addrs) = w.address.to_socket_addrs() else {
                continue;
            };
            for a in addrs {
                if let Some((_, other)) = seen.iter().find(|(s, n)| *s == a && *n != w.name) {
                    bail!(
                        "workers {other:?} and {:?} are the same worker ({} reaches {a}); list each worker once",
                        w.name,
                        w.address
                    );
                }
                seen.push((a, &w.name));
            }
        }
        Ok(())
    }

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
                    under_load: None,
                    return_receiving: None,
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
    fn defaults_fill_ports_and_resolve_the_token_file_from_the_file() {
        let c = Cluster::parse(
            "worker_port = 7171\ntoken_file = \"tok\"\n[[worker]]\nname = \"a\"\naddress = \"10.0.0.1\"\n[[worker]]\nname = \"b\"\naddress = \"10.0.0.2:9\"\n",
            "c.toml",
        )
        .expect("valid");
        assert_eq!(c.worker[0].address, "10.0.0.1:7171");
        assert_eq!(c.worker[1].address, "10.0.0.2:9", "an explicit port stays");
        let dir = std::env::temp_dir().join(format!("dls-cluster-defaults-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("cluster.toml");
        std::fs::write(
            &file,
            "token_file = \"tok\"\n[[worker]]\nname = \"a\"\naddress = \"h:1\"\n",
        )
        .expect("writes");
        let c = Cluster::load(&file).expect("loads");
        assert_eq!(c.token_file, Some(dir.join("tok")));
        let _ = std::fs::remove_dir_all(dir);
        // Without worker_port, a missing port is still an error saying both ways.
        assert!(err("[[worker]]\nname = \"a\"\naddress = \"h\"\n").contains("set worker_port"));
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
        assert_eq!(list.worker[1].name, "127.0.0.1:2", "named by address");
        let indexed = Cluster::from_list_indexed("127.0.0.1:1, 127.0.0.1:2").expect("valid");
        assert_eq!(indexed.worker[1].name, "w1");
        assert!(Cluster::from_list("").is_err());
        assert!(Cluster::from_list("a:1,a:1").is_err());
        // The same worker under two names of its host.
        let twice = Cluster::from_list("127.0.0.1:7401,localhost:7401").expect("two strings");
        let e = format!("{:#}", twice.check_distinct().expect_err("the same worker"));
        assert!(
            e.contains("\"127.0.0.1:7401\" and \"localhost:7401\" are the same worker"),
            "{e}"
        );
        Cluster::from_list("127.0.0.1:7401,127.0.0.2:7401")
            .expect("valid")
            .check_distinct()
            .expect("distinct");
        // Bad costs name the file.
        let bad = "[[worker]]\nname = \"a\"\naddress = \"h:1\"\nc = -1.0\nw = 1.0\nd = 1.0\n";
        assert!(err(bad).starts_with("c.toml: "), "{}", err(bad));
        let huge = "[[worker]]\nname = \"a\"\naddress = \"h:1\"\nc = 1e308\nw = 1.0\nd = 1.0\n";
        assert!(err(huge).contains("at most 1e9"), "{}", err(huge));
    }
}
