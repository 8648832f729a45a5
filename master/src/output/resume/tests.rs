//! A resumable output against what was stored where: runs of a resumed
//! run's products land at their places in the batch, split where the
//! batch's products stop being consecutive, and the journal says so.

use super::*;
use crate::output::journal::Inputs;

fn identity(count: usize) -> Identity {
    Identity {
        form: Form::square(2).to_string(),
        count,
        inputs: Inputs::Random {
            seed: 1,
            generator: "splitmix64".into(),
        },
    }
}

/// C of product `g` as this test stores it: four values g·10 + 0..4.
fn c_of(g: usize) -> Vec<f64> {
    (0..4).map(|v| (g * 10 + v) as f64).collect()
}

#[test]
fn a_resumed_runs_products_are_stored_where_they_belong() {
    let dir = std::env::temp_dir().join(format!("dls-resumable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let out = dir.join("c.npy");
    let form = Form::square(2);
    // A first run stores products 2 and 3 (one run), then dies.
    let mut first = Resumable::open(&out, &identity(10), &form, false).expect("opens");
    assert_eq!(first.resumed(), 0);
    assert_eq!(first.todo(), std::slice::from_ref(&(0..10)));
    let c = Values::F64([c_of(2), c_of(3)].concat());
    first.store_run(2, &c, 0..8, 4).expect("stores");
    first.keep().expect("keeps");
    drop(first);
    // The second computes the rest: its products 1, 2, 3 are the batch's
    // 1, 4, 5, stored as one run of three.
    let mut second = Resumable::open(&out, &identity(10), &form, false).expect("resumes");
    assert_eq!(second.resumed(), 2);
    assert_eq!(second.todo(), &[0..2, 4..10][..]);
    let c = Values::F64([c_of(1), c_of(4), c_of(5)].concat());
    second.store_run(1, &c, 0..12, 4).expect("stores");
    second.keep().expect("keeps");
    let found = Journal::read(&paths(&out).1).expect("reads").expect("a journal");
    assert_eq!(found.done, vec![1..6]);
    // The partial file holds each product at its place.
    let bytes = std::fs::read(paths(&out).0).expect("partial file");
    let prefix = bytes.len() - 10 * 32;
    for g in 1..6 {
        let got: Vec<f64> = bytes[prefix + g * 32..prefix + (g + 1) * 32]
            .chunks(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        assert_eq!(got, c_of(g), "product {g}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
