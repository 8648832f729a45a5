//! Files replaced whole or not at all: written to a temporary file in the
//! same directory, flushed to the disk, then renamed over the target, so
//! an existing file is untouched until the new one is complete and a
//! crash never leaves a partial file under the final name.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The temporary name used for `path`: hidden, in the same directory (a
/// rename across file systems would not be atomic), unique per process and
/// call.
fn temporary(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.tmp-{}-{unique}", std::process::id()))
}

/// Write `path` atomically with `fill`. On any error the temporary file is
/// removed and `path` is as it was.
pub fn atomic_write(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = temporary(path);
    let result = (|| {
        let mut f = BufWriter::new(File::create(&tmp)?);
        fill(&mut f)?;
        let file = f.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename itself is durable once the directory is synced (best
        // effort: not every platform opens directories).
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A file filled in place (at any offsets, in any order) under a temporary
/// name beside `path`, and renamed to `path` only by [`Staged::commit`],
/// once complete. Dropped uncommitted, the temporary file is removed.
pub struct Staged {
    pub file: File,
    tmp: PathBuf,
    path: PathBuf,
    done: bool,
    /// Left on disk if never committed (a resumable run's partial file).
    keep: bool,
}

impl Staged {
    /// A new, empty temporary file for `path`, sized to `len` bytes.
    pub fn create(path: &Path, len: u64) -> std::io::Result<Staged> {
        let tmp = temporary(path);
        let file = File::options().read(true).write(true).create_new(true).open(&tmp)?;
        let staged = Staged {
            file,
            tmp,
            path: path.to_path_buf(),
            done: false,
            keep: false,
        };
        staged.file.set_len(len)?;
        Ok(staged)
    }

    /// A file for `path` staged under the fixed name `partial`, which stays
    /// on disk until committed, whatever happens to this process (a
    /// resumable run): created anew (sized to `len` bytes) when `fresh`,
    /// else reopened as an earlier run left it, which must be `len` bytes.
    pub fn persistent(path: &Path, partial: &Path, len: u64, fresh: bool) -> std::io::Result<Staged> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(fresh)
            .truncate(fresh)
            .open(partial)?;
        if fresh {
            file.set_len(len)?;
        } else if file.metadata()?.len() != len {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} is not {len} bytes long", partial.display()),
            ));
        }
        Ok(Staged {
            file,
            tmp: partial.to_path_buf(),
            path: path.to_path_buf(),
            done: false,
            keep: true,
        })
    }

    /// Flush to the disk and rename to the final name. When the rename
    /// fails, the complete file stays under its temporary name, which the
    /// error gives: nothing is lost.
    pub fn commit(mut self) -> std::io::Result<PathBuf> {
        self.file.sync_all()?;
        self.done = true;
        if let Err(e) = std::fs::rename(&self.tmp, &self.path) {
            return Err(std::io::Error::new(
                e.kind(),
                format!("{e}; the complete file is {}", self.tmp.display()),
            ));
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(self.path.clone())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done && !self.keep {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "dls-atomic-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    fn entries(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .expect("lists")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let d = dir();
        let p = d.join("c.npy");
        std::fs::write(&p, b"old and good").expect("writes");
        let err = atomic_write(&p, |f| {
            f.write_all(b"half of the new")?;
            Err(std::io::Error::other("disk full"))
        })
        .expect_err("fails");
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(std::fs::read(&p).expect("reads"), b"old and good");
        assert_eq!(entries(&d), vec!["c.npy".to_string()]);
        atomic_write(&p, |f| f.write_all(b"new")).expect("writes");
        assert_eq!(std::fs::read(&p).expect("reads"), b"new");
        assert_eq!(entries(&d), vec!["c.npy".to_string()]);
        std::fs::remove_dir_all(&d).expect("cleans up");
    }

    #[test]
    fn a_missing_directory_fails_naming_nothing_written() {
        let d = dir().join("missing");
        let err = atomic_write(&d.join("c.npy"), |f| f.write_all(b"x")).expect_err("fails");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        assert!(!d.exists());
    }
}
