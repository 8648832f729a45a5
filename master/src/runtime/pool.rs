//! The links of a session, owned in one place: connected together, lent to
//! a run for its length, closed together.

use crate::config::cluster::Cluster;
use crate::runtime::link::{self, Link, Timeouts};
use anyhow::{bail, Result};
use dls_protocol::Token;

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
    pub async fn connect(cluster: &Cluster, token: Option<&Token>, t: Timeouts) -> Result<Pool> {
        Ok(Pool::new(link::connect_all(cluster, token, t).await?))
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
