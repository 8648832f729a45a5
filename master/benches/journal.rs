//! What journalling costs the run's own thread: storing results one
//! product at a time into the `--output` file plain (`NpyWriter`) and
//! journalled (`Resumable`: the same writes, each product recorded, the
//! records handed to the journal's thread every 0.5 s), in the same run,
//! alternating which goes first. Each round stores every product of a
//! batch of small products into a fresh file.
//!
//! `cargo bench -p dls-master --bench journal [-- PRODUCTS [ROUNDS]]`
//! (default 100,000 products of 16×16 float64, 11 rounds). Prints medians
//! and their ratio.

use dls_master::output::journal::{Identity, Inputs};
use dls_master::output::npy::NpyWriter;
use dls_master::output::resume::Resumable;
use dls_master::session::Sink;
use dls_protocol::{Form, Values};
use std::time::Instant;

fn store_all(sink: &mut dyn Sink, c: &Values, count: usize, per: usize) {
    for p in 0..count {
        sink.store(p, c, 0..per).expect("stores");
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let count = args.first().copied().unwrap_or(100_000);
    let rounds = args.get(1).copied().unwrap_or(11);
    let form = Form::square(16);
    let per = form.shape.c_len() as usize;
    let c = Values::F64((0..per).map(|v| v as f64).collect());
    let dir = std::env::temp_dir().join(format!("dls-journal-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let identity = Identity {
        form: form.to_string(),
        count,
        inputs: Inputs::Random {
            seed: 1,
            generator: "splitmix64".into(),
        },
    };
    let plain_run = || {
        let path = dir.join("plain.npy");
        let t = Instant::now();
        let mut w = NpyWriter::create(&path, &form, count).expect("creates");
        store_all(&mut w, &c, count, per);
        let s = t.elapsed().as_secs_f64();
        w.finish().expect("finishes");
        s
    };
    let journalled_run = || {
        let path = dir.join("journalled.npy");
        let t = Instant::now();
        let mut r = Resumable::open(&path, &identity, &form, true).expect("opens");
        store_all(&mut r, &c, count, per);
        let s = t.elapsed().as_secs_f64();
        r.finish().expect("finishes");
        s
    };
    let (mut plain, mut journalled) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        if r % 2 == 0 {
            plain.push(plain_run());
            journalled.push(journalled_run());
        } else {
            journalled.push(journalled_run());
            plain.push(plain_run());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (p, j) = (median(plain), median(journalled));
    println!("storing {count} products of {form}, one at a time, {rounds} rounds, medians:");
    println!(
        "  plain NpyWriter      {:8.2} ms ({:.3} µs a product)",
        p * 1e3,
        p / count as f64 * 1e6
    );
    println!(
        "  journalled           {:8.2} ms ({:.3} µs a product)",
        j * 1e3,
        j / count as f64 * 1e6
    );
    println!("  ratio (journalled / plain) {:.3}", j / p);
}
