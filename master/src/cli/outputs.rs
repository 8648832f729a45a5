//! The files `dls run` writes: checked before any work (so a bad path
//! costs nothing), never partial under their final names (C is written in
//! place under a temporary name and renamed once complete; when the rename
//! fails, the error names the complete temporary file); a failed trace or
//! chart does not stop the summary.

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// Check that `path` can be written as `what` (`--output`, `--trace`, …):
/// its directory exists and takes new files, it is not a directory, and
/// it is none of `inputs`. Nothing is left behind.
pub fn check_writable(path: &Path, what: &str, inputs: &[PathBuf]) -> Result<()> {
    let shown = path.display();
    if path.is_dir() {
        bail!("{what} {shown} is a directory; give a file name");
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        bail!("{what} {shown}: the directory {} does not exist", dir.display());
    }
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    };
    if let Some(input) = inputs.iter().find(|i| same(path, i)) {
        bail!(
            "{what} {shown} is also an input ({}); write C elsewhere",
            input.display()
        );
    }
    let probe = dir.join(format!(".dls-write-check-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => bail!("{what} {shown}: cannot create files in {}: {e}", dir.display()),
    }
}

/// Check that the filesystem holding `path` has room for `bytes` more (the
/// temporary file is written beside the old one, so both must fit), where
/// the filesystem says how much it has.
pub fn check_space(path: &Path, bytes: u64, what: &str) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(st) = rustix::fs::statvfs(&dir) else {
        return Ok(());
    };
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    if bytes > free {
        bail!(
            "{what} {}: C needs {}, but {} has only {} free",
            path.display(),
            crate::runtime::batch::human_bytes(bytes),
            dir.display(),
            crate::runtime::batch::human_bytes(free)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_larger_than_the_free_space_are_refused_before_any_work() {
        let p = std::env::temp_dir().join("dls-space-check.npy");
        check_space(&p, 1, "--output").expect("a byte fits");
        let e = format!(
            "{:#}",
            check_space(&p, u64::MAX / 4, "--output").expect_err("too large")
        );
        assert!(
            e.starts_with("--output ") && e.contains("has only") && e.contains("free"),
            "{e}"
        );
    }

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dls-outputs-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    #[test]
    fn bad_paths_are_named_before_any_work() {
        let d = dir("check");
        let err =
            |p: &Path, inputs: &[PathBuf]| check_writable(p, "--output", inputs).expect_err("refused").to_string();
        assert!(err(&d, &[]).contains("is a directory"));
        assert!(err(&d.join("nope/c.npy"), &[]).contains("does not exist"));
        let a = d.join("a.npy");
        std::fs::write(&a, b"A").expect("writes");
        let e = err(&d.join("./a.npy"), std::slice::from_ref(&a));
        assert!(e.contains("is also an input"), "{e}");
        check_writable(&d.join("c.npy"), "--output", std::slice::from_ref(&a)).expect("fine");
        assert_eq!(std::fs::read_dir(&d).expect("lists").count(), 1, "no probe left behind");
        std::fs::remove_dir_all(&d).expect("cleans up");
    }
}
