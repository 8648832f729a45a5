//! Running the `dls` binary as a user does, for the command-line tests.

use dls_master::output::npy;
use dls_protocol::Values;
use std::path::PathBuf;
use std::process::Command;

/// Runs `dls` with `args` (and `DLS_TOKEN` only if `token` is given):
/// whether it succeeded, its standard output and its standard error.
pub fn dls(args: &[&str], token: Option<&str>) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dls"));
    cmd.args(args).env_remove("DLS_TOKEN");
    if let Some(t) = token {
        cmd.env("DLS_TOKEN", t);
    }
    let out = cmd.output().expect("runs dls");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A path named `name` in a directory of this test process's own.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dls-run-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d.join(name)
}

/// `count` float64 matrices of rows×cols for a `.npy` file.
pub fn mats(count: usize, rows: usize, cols: usize, data: Vec<f64>) -> npy::Matrices {
    npy::Matrices {
        count: Some(count),
        rows,
        cols,
        data: Values::F64(data),
    }
}

/// A path as a command-line argument.
pub fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `dls args` fails with one clear line mentioning `needle`, prints
/// nothing on standard output and does not panic.
pub fn fails(args: &[&str], token: Option<&str>, needle: &str) {
    let (ok, out, err) = dls(args, token);
    assert!(!ok, "should fail: {args:?}");
    assert!(err.contains(needle), "{err:?} should mention {needle:?}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.is_empty());
}
