//! What reading one large product's panels from files costs the master:
//! each panel into fresh memory (`ProductJob::panel`) against into the
//! memory of the one before (`ProductJob::panel_into`, as a link does
//! once a panel it handed out is let go), in the same process, in turn.
//! A and B are row-major float64 files (`.npy` data without the header);
//! the panels are those of one rectangle along the whole of k. Freed
//! buffers go back to the system, as `dls run` of one product has them.
//!
//! `cargo bench -p dls-master --bench panels [-- N ROWS COLS DEPTH [ROUNDS]]`
//! (default N = 2048, a 1200×800 rectangle, panels 44 deep, 5 rounds).
//! Prints the median time to read every panel of the rectangle each way.

use dls_lp::rectangles::Rect;
use dls_master::session::{InputFile, Matrix, ProductJob, Source};
use dls_protocol::DType;
use std::sync::Arc;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// An n×n float64 file of values `seed + i`, read where they lie.
fn file(dir: &std::path::Path, name: &str, n: usize, seed: f64) -> Source {
    let path = dir.join(name);
    let bytes: Vec<u8> = (0..n * n).flat_map(|i| (seed + i as f64).to_le_bytes()).collect();
    std::fs::write(&path, bytes).expect("a temporary file");
    let f = std::fs::File::open(&path).expect("opens");
    Source::File(Arc::new(InputFile {
        file: f,
        path,
        prefix: 0,
        dtype: DType::F64,
        big_endian: false,
        len: n * n,
    }))
}

fn main() {
    // As `dls run` does for one product: freed buffers go back to the system.
    dls_common::return_freed_buffers();
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let arg = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let (n, rows, cols, depth, rounds) = (arg(0, 2048), arg(1, 1200), arg(2, 800), arg(3, 44), arg(4, 5));
    let (rows, cols, depth) = (rows.min(n), cols.min(n), depth.clamp(1, n));
    let dir = std::env::temp_dir().join(format!("dls-bench-panels-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let job = ProductJob::new(
        Matrix::new("A", file(&dir, "A", n, 0.0), n, n, false).expect("A"),
        Matrix::new("B", file(&dir, "B", n, 0.5), n, n, false).expect("B"),
    )
    .expect("a product");
    let rect = Rect {
        worker: 0,
        row: 0,
        col: 0,
        height: rows,
        width: cols,
    };
    let panels: Vec<_> = (0..n).step_by(depth).map(|k| k..(k + depth).min(n)).collect();
    let mut took = [Vec::new(), Vec::new()];
    for r in 0..rounds {
        for way in [r % 2, 1 - r % 2] {
            let t0 = Instant::now();
            let mut spare = None;
            for ks in &panels {
                let p = match way {
                    0 => job.panel(&rect, ks.clone()),
                    _ => job.panel_into(&rect, ks.clone(), spare.take()),
                }
                .expect("reads");
                spare = Some(std::hint::black_box(p));
            }
            took[way].push(t0.elapsed().as_secs_f64());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{} panels of {rows}×{depth} · {depth}×{cols} float64 from {n}×{n} files, {rounds} rounds (medians)",
        panels.len()
    );
    for (way, name) in ["into fresh memory", "into the last panel's"].iter().enumerate() {
        println!("{name:>22}: {:8.2} ms", median(took[way].clone()) * 1e3);
    }
}
