//! The journal against a bitmap of the products recorded (the oracle),
//! and crashes simulated by dropping it before a sync or tearing its tail.

use super::*;
use rand::{Rng, SeedableRng};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dls-journal-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    d
}

fn random(count: usize, seed: u64) -> Identity {
    Identity {
        form: "8×8 float64".into(),
        count,
        inputs: Inputs::Random {
            seed,
            generator: crate::runtime::random::GENERATOR.into(),
        },
    }
}

/// The ranges of the set bits, in order.
fn runs(bits: &[bool]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bits.len() {
        if bits[i] {
            let s = i;
            while i < bits.len() && bits[i] {
                i += 1;
            }
            out.push(s..i);
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn what_was_synced_reads_back_as_the_products_recorded() {
    let d = dir("roundtrip");
    let data = File::create(d.join("c")).expect("data file");
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for trial in 0..50 {
        let count = rng.random_range(1..300);
        let path = d.join(format!("j{trial}"));
        let id = random(count, trial);
        let mut j = Journal::create(&path, &id).expect("creates");
        let mut bits = vec![false; count];
        let mut synced = bits.clone();
        for _ in 0..rng.random_range(0..40) {
            let s = rng.random_range(0..count);
            let len = rng.random_range(0..=(count - s).min(20));
            j.record(s..s + len);
            bits[s..s + len].iter_mut().for_each(|b| *b = true);
            if rng.random_bool(0.3) {
                j.sync(&data).expect("syncs");
                synced.clone_from(&bits);
            }
        }
        // The master dies here: what was recorded after the last sync is lost.
        drop(j);
        let found = Journal::read(&path).expect("reads").expect("a journal");
        assert_eq!(found.identity, id);
        assert_eq!(found.done, runs(&synced), "trial {trial}");
        assert_eq!(found.products_done(), synced.iter().filter(|&&b| b).count());
        let missing: Vec<bool> = synced.iter().map(|b| !b).collect();
        assert_eq!(found.missing(), runs(&missing), "trial {trial}");
    }
}

#[test]
fn a_torn_last_line_is_ignored_and_appending_goes_on() {
    let d = dir("torn");
    let data = File::create(d.join("c")).expect("data file");
    let path = d.join("j");
    let mut j = Journal::create(&path, &random(100, 1)).expect("creates");
    j.record(0..10);
    j.sync(&data).expect("syncs");
    drop(j);
    // A crash in the middle of writing a record.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"done 10 1"))
        .expect("tears");
    let found = Journal::read(&path).expect("reads").expect("a journal");
    assert_eq!(found.done, vec![0..10]);
    assert_eq!(found.missing(), vec![10..100]);
    // Resuming cuts the torn bytes off and appends whole records.
    let mut j = Journal::append(&path).expect("appends");
    j.record(50..60);
    j.sync(&data).expect("syncs");
    let found = Journal::read(&path).expect("reads").expect("a journal");
    assert_eq!(found.done, vec![0..10, 50..60]);
    assert_eq!(found.missing(), vec![10..50, 60..100]);
}

#[test]
fn records_beyond_the_batch_or_garbage_are_refused() {
    let d = dir("bad");
    let path = d.join("j");
    let head = serde_json::to_string(&random(10, 1)).expect("json");
    for (body, needle) in [
        (format!("{MAGIC}\n{head}\ndone 8 3\n"), "line 3"),
        (format!("{MAGIC}\n{head}\nhello\n"), "line 3"),
        (format!("{MAGIC}\nnot json\n"), "unreadable"),
        ("something else\n".to_string(), "not a dls journal"),
    ] {
        std::fs::write(&path, body).expect("writes");
        let err = Journal::read(&path).expect_err("refused");
        assert!(format!("{err:#}").contains(needle), "{err:#}");
    }
    assert_eq!(Journal::read(&d.join("none")).expect("no journal is no error"), None);
    // Created, but no line whole yet (or only the first): nothing done.
    for body in ["", "dls-jour", &format!("{MAGIC}\n"), &format!("{MAGIC}\n{{\"cou")] {
        std::fs::write(&path, body).expect("writes");
        assert_eq!(Journal::read(&path).expect("no error"), None, "{body:?}");
    }
}

#[test]
fn another_batch_is_told_apart_in_words() {
    let d = dir("identity");
    let a = d.join("a.npy");
    let b = d.join("b.npy");
    std::fs::write(&a, vec![1u8; 100_000]).expect("writes");
    std::fs::write(&b, vec![2u8; 1_000]).expect("writes");
    let files = || Identity {
        form: "8×8 float64".into(),
        count: 10,
        inputs: Inputs::Files {
            a: FileId::of(&a).expect("a"),
            b: FileId::of(&b).expect("b"),
        },
    };
    let then = files();
    assert_eq!(files().difference(&then), None, "the same files");
    // One byte changed in the middle of A, same size, same time stamp.
    let modified = std::fs::metadata(&a).expect("meta").modified().expect("mtime");
    let mut bytes = vec![1u8; 100_000];
    bytes[50_000] = 9;
    std::fs::write(&a, &bytes).expect("rewrites");
    std::fs::File::options()
        .write(true)
        .open(&a)
        .and_then(|f| f.set_modified(modified))
        .expect("keeps the time stamp");
    let now = files();
    let said = now.difference(&then).expect("told apart");
    assert!(said.contains("a.npy") && said.contains("modified"), "{said}");
    std::fs::write(&b, vec![2u8; 1_001]).expect("grows");
    let said = files().difference(&now).expect("told apart");
    assert!(
        said.contains("b.npy") && said.contains("1000 bytes then, 1001 now"),
        "{said}"
    );
    let said = random(10, 1).difference(&random(10, 2)).expect("seeds differ");
    assert!(said.contains("seed 2") && said.contains("seed is 1"), "{said}");
    let said = random(11, 1).difference(&random(10, 1)).expect("counts differ");
    assert!(said.contains("10 products") && said.contains("11"), "{said}");
    assert!(random(10, 1).difference(&then).is_some());
    // A journal of an earlier build names no generator: its inputs were
    // drawn by xorshift64, and this build does not fill in the rest.
    let earlier: Identity =
        serde_json::from_str(r#"{"form":"8×8 float64","count":10,"inputs":{"random":{"seed":1}}}"#).expect("parses");
    let said = random(10, 1).difference(&earlier).expect("generators differ");
    assert!(said.contains("xorshift64") && said.contains("splitmix64"), "{said}");
    let written = serde_json::to_string(&random(10, 1)).expect("writes");
    assert_eq!(
        serde_json::from_str::<Identity>(&written).expect("reads"),
        random(10, 1)
    );
}
