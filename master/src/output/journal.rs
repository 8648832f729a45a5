//! The journal of a run that writes its results to a file: which products'
//! C are on disk, so that a run whose master died can be finished by
//! running the same command again (resume).
//!
//! A journal is a text file beside the staged output:
//!
//! ```text
//! dls-journal 1
//! {"form":"64×64 float64","count":100,"inputs":{...}}
//! done 0 16
//! done 32 16
//! ```
//!
//! The second line names the batch ([`Identity`]); every `done START LEN`
//! line says that products START..START+LEN have their C written and
//! synced to the staged file. Lines are appended only after the C bytes
//! they speak of are synced ([`Journal::sync`]), and are themselves synced
//! in groups, so after a crash the journal never claims more than the file
//! holds. A torn last line (no newline) is ignored.
//!
//! Synchronous and free of policy: when to sync is the caller's choice.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

const MAGIC: &str = "dls-journal 1";

/// What a journal belongs to: the products and where their inputs come
/// from. Two runs may share a journal only if their identities are equal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The products, as `Form` displays them ("64×64 float64").
    pub form: String,
    pub count: usize,
    pub inputs: Inputs,
}

/// Where the inputs come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Inputs {
    /// Drawn from this seed (`--batch --size`) by `generator`: a build
    /// that draws them otherwise must not fill in the rest of the batch.
    Random {
        seed: u64,
        /// Journals written before it was recorded drew with xorshift64.
        #[serde(default = "earlier_generator")]
        generator: String,
    },
    /// Read from two files.
    Files { a: FileId, b: FileId },
}

/// The generator of random inputs before SplitMix64 (journals that name none).
fn earlier_generator() -> String {
    "xorshift64".into()
}

/// A file as it was: path, size, modification time and a checksum of a
/// sample of its bytes (the first and last 4 KiB and 62 blocks spread
/// between), enough to notice a file replaced or rewritten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileId {
    pub path: PathBuf,
    pub size: u64,
    pub modified_ns: u128,
    pub sample: u64,
}

impl FileId {
    pub fn of(path: &Path) -> Result<FileId> {
        use std::os::unix::fs::FileExt;
        let full = std::fs::canonicalize(path).with_context(|| format!("reading {}", path.display()))?;
        let file = File::open(&full).with_context(|| format!("reading {}", path.display()))?;
        let meta = file.metadata().with_context(|| format!("reading {}", path.display()))?;
        let modified_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let size = meta.len();
        const BLOCK: u64 = 4096;
        const BLOCKS: u64 = 64;
        let mut hash = Fnv::default();
        let mut buf = vec![0u8; BLOCK as usize];
        for k in 0..BLOCKS {
            let at = if size <= BLOCK {
                0
            } else {
                (size - BLOCK) * k / (BLOCKS - 1)
            };
            let n = (size - at.min(size)).min(BLOCK) as usize;
            file.read_exact_at(&mut buf[..n], at)
                .with_context(|| format!("reading {}", path.display()))?;
            hash.write(&at.to_le_bytes());
            hash.write(&buf[..n]);
            if size <= BLOCK {
                break;
            }
        }
        Ok(FileId {
            path: full,
            size,
            modified_ns,
            sample: hash.0,
        })
    }
}

/// FNV-1a, 64 bits: a checksum to notice changes, not a defence.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

impl Identity {
    /// How `other` (an earlier run's) differs from this run, in words, or
    /// `None` if they are the same batch.
    pub fn difference(&self, other: &Identity) -> Option<String> {
        if self.form != other.form || self.count != other.count {
            return Some(format!(
                "it is for {} products of {}, this run has {} of {}",
                other.count, other.form, self.count, self.form
            ));
        }
        match (&self.inputs, &other.inputs) {
            (Inputs::Random { seed: a, .. }, Inputs::Random { seed: b, .. }) if a != b => {
                Some(format!("it is for random inputs of seed {b}, this run's seed is {a}"))
            }
            (Inputs::Random { generator: a, .. }, Inputs::Random { generator: b, .. }) if a != b => Some(format!(
                "it is for random inputs drawn by {b} (an earlier build), this build draws them by {a}"
            )),
            (Inputs::Files { a, b }, Inputs::Files { a: oa, b: ob }) => {
                file_difference("A", a, oa).or_else(|| file_difference("B", b, ob))
            }
            (Inputs::Random { .. }, Inputs::Files { .. }) => Some("it is for inputs read from files".into()),
            (Inputs::Files { .. }, Inputs::Random { .. }) => Some("it is for random inputs".into()),
            _ => None,
        }
    }
}

fn file_difference(which: &str, now: &FileId, then: &FileId) -> Option<String> {
    if now.path != then.path {
        return Some(format!(
            "its {which} was {}, this run's is {}",
            then.path.display(),
            now.path.display()
        ));
    }
    if now.size != then.size {
        return Some(format!(
            "{} changed since: {} bytes then, {} now",
            now.path.display(),
            then.size,
            now.size
        ));
    }
    if now.modified_ns != then.modified_ns || now.sample != then.sample {
        return Some(format!("{} was modified since", now.path.display()));
    }
    None
}

/// A journal open for appending.
pub struct Journal {
    path: PathBuf,
    file: File,
    /// Ranges recorded but not yet in the file.
    pending: Vec<Range<usize>>,
}

/// What an earlier run left in a journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub identity: Identity,
    /// Products whose C is on disk, as sorted, disjoint ranges.
    pub done: Vec<Range<usize>>,
}

impl Found {
    pub fn products_done(&self) -> usize {
        self.done.iter().map(|r| r.len()).sum()
    }

    /// The products still to compute, as sorted, disjoint ranges.
    pub fn missing(&self) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut at = 0;
        for r in &self.done {
            if r.start > at {
                out.push(at..r.start);
            }
            at = at.max(r.end);
        }
        if at < self.identity.count {
            out.push(at..self.identity.count);
        }
        out
    }
}

impl Journal {
    fn at(path: &Path, file: File) -> Journal {
        Journal {
            path: path.to_path_buf(),
            file,
            pending: Vec::new(),
        }
    }

    /// Start a new journal at `path` for `identity` (replacing any).
    pub fn create(path: &Path, identity: &Identity) -> Result<Journal> {
        let head = serde_json::to_string(identity).context("describing the batch")?;
        let mut file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        writeln!(file, "{MAGIC}\n{head}")
            .and_then(|()| file.sync_data())
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Journal::at(path, file))
    }

    /// Go on appending to the journal an earlier run left at `path`, after
    /// its last whole line (a torn record is cut off first).
    pub fn append(path: &Path) -> Result<Journal> {
        let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let file = File::options()
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        if whole < text.len() {
            file.set_len(whole as u64)
                .and_then(|()| file.sync_data())
                .with_context(|| format!("cutting the torn record off {}", path.display()))?;
        }
        Ok(Journal::at(path, file))
    }

    /// Read the journal at `path`: `None` if there is none.
    pub fn read(path: &Path) -> Result<Option<Found>> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        // Only whole lines count: a torn last line was never synced.
        let whole = text
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(&text[..0], |i| &text[..=i]);
        if whole.is_empty() {
            // Created, never a whole line synced (a master stopped at once,
            // or a reader looking while the first line is written):
            // nothing is done, as if there were no journal.
            return Ok(None);
        }
        let text = String::from_utf8_lossy(whole);
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            bail!("{} is not a dls journal", path.display());
        }
        let Some(head) = lines.next() else {
            return Ok(None); // the head's line not yet whole: nothing done
        };
        let identity: Identity = serde_json::from_str(head)
            .ok()
            .with_context(|| format!("{}: the batch it belongs to is unreadable", path.display()))?;
        let mut done = Vec::new();
        for (k, line) in lines.enumerate() {
            let mut f = line.split(' ');
            let range = match (
                f.next(),
                f.next().map(str::parse::<usize>),
                f.next().map(str::parse::<usize>),
            ) {
                (Some("done"), Some(Ok(start)), Some(Ok(len)))
                    if start.checked_add(len).is_some_and(|e| e <= identity.count) =>
                {
                    start..start + len
                }
                _ => bail!("{}: line {} is not a record: {line:?}", path.display(), k + 3),
            };
            done.push(range);
        }
        Ok(Some(Found {
            done: merged(done),
            identity,
        }))
    }

    /// Note that products `range` have their C written (not yet synced).
    pub fn record(&mut self, range: Range<usize>) {
        append_range(&mut self.pending, range);
    }

    /// Ranges recorded since the last sync.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Make the recorded ranges durable: `data` (the file holding C)
    /// first, then the records that speak of it.
    pub fn sync(&mut self, data: &File) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        data.sync_data().context("syncing the results written")?;
        let mut lines = String::new();
        for r in self.pending.drain(..) {
            lines.push_str(&format!("done {} {}\n", r.start, r.len()));
        }
        self.file
            .write_all(lines.as_bytes())
            .and_then(|()| self.file.sync_data())
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// Add `range` to `ranges`, extending the last one when it follows it.
pub(crate) fn append_range(ranges: &mut Vec<Range<usize>>, range: Range<usize>) {
    match ranges.last_mut() {
        _ if range.is_empty() => {}
        Some(last) if last.end == range.start => last.end = range.end,
        _ => ranges.push(range),
    }
}

/// Sorted, disjoint ranges covering the same products.
fn merged(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests;
