//! `dls run --output C.npy`, resumable: C is written in place into a
//! partial file beside the output (`.C.npy.dls-partial`) and every
//! product written is journalled (`.C.npy.dls-journal`, see
//! [`super::journal`]). A run whose master died leaves both; the same
//! command again finds them, checks they belong to this batch, and
//! computes only the products missing. The output gets its name, and the
//! journal goes, once every product is in.

use super::journal::{append_range, Found, Identity, Journal};
use super::npy::NpyWriter;
use crate::runtime::data::{Runs, Sink};
use anyhow::{bail, Context, Result};
use dls_protocol::{Form, Values};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the journal is made durable while results arrive: a master
/// killed loses at most this much of its results' records (the results
/// themselves are redone). Syncing happens on a thread of its own, so the
/// run never waits for the disk.
pub const SYNC_EVERY: Duration = Duration::from_millis(500);

/// The thread that makes journal records durable: C's file first, then
/// the records that speak of it, for each batch of records it is sent.
struct Syncer {
    tx: Option<std::sync::mpsc::Sender<Vec<Range<usize>>>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl Syncer {
    fn start(mut journal: Journal, data: std::fs::File) -> Syncer {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Range<usize>>>();
        let thread = std::thread::Builder::new().name("dls-journal".into()).spawn(move || {
            for ranges in rx {
                for r in ranges {
                    journal.record(r);
                }
                journal.sync(&data)?;
            }
            Ok(())
        });
        match thread {
            Ok(t) => Syncer {
                tx: Some(tx),
                thread: Some(t),
            },
            // No thread: nothing is journalled, and `finish` says so.
            Err(_) => Syncer { tx: None, thread: None },
        }
    }

    /// Hand `ranges` over to be made durable (soon).
    fn send(&mut self, ranges: Vec<Range<usize>>) {
        if let Some(tx) = &self.tx {
            if tx.send(ranges).is_err() {
                self.tx = None;
            }
        }
    }

    /// Everything sent is durable when this returns, or the error says why not.
    fn stop(&mut self) -> Result<()> {
        self.tx = None;
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| bail!("the journal's thread failed")),
            None => bail!("the journal could not be kept (no thread to sync it)"),
        }
    }
}

/// The partial file and the journal of `output`.
pub fn paths(output: &Path) -> (PathBuf, PathBuf) {
    let name = output
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    (
        output.with_file_name(format!(".{name}.dls-partial")),
        output.with_file_name(format!(".{name}.dls-journal")),
    )
}

/// The output of a resumable run.
pub struct Resumable {
    writer: NpyWriter,
    syncer: Syncer,
    /// Products stored since the last hand-over to the syncer.
    pending: Vec<Range<usize>>,
    journal_path: PathBuf,
    /// The products this run computes (of the whole batch), in order: the
    /// run's `i`-th product is the `i`-th of these.
    todo: Runs,
    resumed: usize,
    last_sync: Instant,
}

impl Resumable {
    /// The output of `identity`'s batch at `output`: resumed from what an
    /// earlier run of the same batch left, or new (with `restart`, or when
    /// there is nothing to resume). A journal of another batch is refused,
    /// naming the difference.
    pub fn open(output: &Path, identity: &Identity, form: &Form, restart: bool) -> Result<Resumable> {
        let (partial, journal_path) = paths(output);
        if restart {
            for p in [&partial, &journal_path] {
                match std::fs::remove_file(p) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(e).with_context(|| format!("removing {}", p.display()))
                    }
                    _ => {}
                }
            }
        }
        let found = Journal::read(&journal_path)?;
        if let Some(f) = &found {
            if let Some(diff) = identity.difference(&f.identity) {
                bail!(
                    "{} is the journal of another batch ({diff}): run with --restart to start {} over (what it holds is discarded)",
                    journal_path.display(),
                    output.display()
                );
            }
        }
        let count = identity.count;
        match found.filter(|_| partial.exists()) {
            Some(f) => {
                let writer = NpyWriter::resumable(output, &partial, form, count, false)
                    .with_context(|| format!("resuming from {}", journal_path.display()))?;
                let journal = Journal::append(&journal_path)?;
                Resumable::new(writer, journal, journal_path, &f)
            }
            None => {
                let writer = NpyWriter::resumable(output, &partial, form, count, true)?;
                let journal = Journal::create(&journal_path, identity)?;
                let nothing = Found {
                    identity: identity.clone(),
                    done: Vec::new(),
                };
                Resumable::new(writer, journal, journal_path, &nothing)
            }
        }
    }

    fn new(writer: NpyWriter, journal: Journal, journal_path: PathBuf, found: &Found) -> Result<Resumable> {
        let data = writer.file().try_clone().context("opening the output file twice")?;
        Ok(Resumable {
            writer,
            syncer: Syncer::start(journal, data),
            pending: Vec::new(),
            journal_path,
            todo: Runs::new(found.missing()),
            resumed: found.products_done(),
            last_sync: Instant::now(),
        })
    }

    /// Products an earlier run already wrote.
    pub fn resumed(&self) -> usize {
        self.resumed
    }

    /// The products still to compute, as ranges of the whole batch.
    pub fn todo(&self) -> &[Range<usize>] {
        self.todo.ranges()
    }

    /// The journal, made durable: results stored so far survive whatever
    /// happens next. Call before giving up on a run.
    pub fn keep(&mut self) -> Result<()> {
        let last = std::mem::take(&mut self.pending);
        self.syncer.send(last);
        self.syncer.stop()
    }

    /// Every product is in: give the output its name and drop the journal.
    pub fn finish(mut self) -> Result<PathBuf> {
        // Whether or not the journal could be kept, C is complete.
        let _ = self.keep();
        let path = self.writer.finish()?;
        std::fs::remove_file(&self.journal_path)
            .with_context(|| format!("removing {} (C is complete)", self.journal_path.display()))?;
        Ok(path)
    }
}

impl Resumable {
    /// Note products `global` as stored; hand the records over to be made
    /// durable every `SYNC_EVERY`.
    fn stored(&mut self, global: Range<usize>) {
        append_range(&mut self.pending, global);
        if self.last_sync.elapsed() >= SYNC_EVERY {
            let ranges = std::mem::take(&mut self.pending);
            self.syncer.send(ranges);
            self.last_sync = Instant::now();
        }
    }
}

impl Sink for Resumable {
    fn store(&mut self, product: usize, c: &Values, range: Range<usize>) -> std::io::Result<()> {
        let per = range.len();
        self.store_run(product, c, range, per)
    }

    /// The run's products, split where they stop being consecutive in the
    /// batch (a resumed run skips what was done), one write per piece.
    fn store_run(&mut self, first: usize, c: &Values, range: Range<usize>, per: usize) -> std::io::Result<()> {
        let per = per.max(1);
        let count = range.len() / per;
        let mut k = 0;
        while k < count {
            let (global, consecutive) = self.todo.locate(first + k);
            let n = consecutive.min(count - k);
            let values = range.start + k * per..range.start + (k + n) * per;
            self.writer.store_run(global, c, values, per)?;
            self.stored(global..global + n);
            k += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
