//! The links of a session, owned in one place: connected together, lent to
//! a run for its length, closed together.

use crate::config::cluster::Cluster;
use crate::runtime::link::{self, ConnectOptions, Link};
use anyhow::{bail, Result};
use dls_protocol::Token;

/// A worker left out of a session, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LeftOut {
    pub worker: String,
    pub reason: String,
}

impl LeftOut {
    /// "w1 (reason); w2 (reason)".
    pub fn list(left: &[LeftOut]) -> String {
        left.iter()
            .map(|l| format!("{} ({})", l.worker, l.reason))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Authenticated connections to the workers of a session, in cluster order.
pub struct Pool {
    links: Vec<Link>,
}

impl Pool {
    pub fn new(links: Vec<Link>) -> Pool {
        Pool { links }
    }

    /// Connect to every worker of the cluster, all at once; the first
    /// failure (in cluster order) is the error.
    pub async fn connect(cluster: &Cluster, token: Option<&Token>, t: ConnectOptions) -> Result<Pool> {
        Ok(Pool::new(link::connect_all(cluster, token, t).await?))
    }

    /// Connect to every worker of the cluster that answers, all at once.
    /// Those that cannot be reached, refuse or time out are left out and
    /// returned with the reason; it fails only when none is left.
    pub async fn connect_available(
        cluster: &Cluster,
        token: Option<&Token>,
        t: ConnectOptions,
    ) -> Result<(Pool, Vec<LeftOut>)> {
        let mut links = Vec::new();
        let mut left = Vec::new();
        for (w, r) in cluster.worker.iter().zip(link::try_all(cluster, token, t).await?) {
            match r {
                Ok(l) => links.push(l),
                Err(e) => left.push(LeftOut {
                    worker: w.name.clone(),
                    reason: format!("{e:#}"),
                }),
            }
        }
        if links.is_empty() {
            bail!("no worker could be used: {}", LeftOut::list(&left));
        }
        Ok((Pool::new(links), left))
    }

    /// Drop the links at these indices (closing them), keeping the order of
    /// the rest.
    pub fn remove(&mut self, indices: &[usize]) {
        let mut i = 0;
        self.links.retain(|_| {
            i += 1;
            !indices.contains(&(i - 1))
        });
    }

    /// The workers' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.links.iter().map(|l| l.name.clone()).collect()
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    pub fn links_mut(&mut self) -> &mut [Link] {
        &mut self.links
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Say goodbye to every worker and wait (up to a second each) for its
    /// answer, so that each is free for the next master when this returns.
    pub async fn close(&mut self) {
        link::close_all(&mut self.links).await;
    }

    /// Every link, for a run that gives each its own task; [`Pool::restore`]
    /// takes them back.
    pub(crate) fn lend(&mut self) -> Result<Vec<Link>> {
        if self.links.is_empty() {
            bail!("no worker is connected (a previous run lost its connections)");
        }
        Ok(std::mem::take(&mut self.links))
    }

    pub(crate) fn restore(&mut self, links: Vec<Link>) {
        self.links = links;
    }
}
