#![allow(dead_code)]
use dls_lp::{Platform, Worker};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Platform families of the report's section 5.3 and a few more.
#[derive(Debug, Clone, Copy)]
pub enum Family {
    /// Same c, d for all; w differs.
    Bus,
    /// Everything differs, d = z c with the given z.
    Star(f64),
    /// d/c differs between workers.
    MixedZ,
}

/// A random platform of 1 to `max_p` workers and a family, both from `seed`.
pub fn seeded_platform(r: &mut ChaCha8Rng, seed: u64, max_p: usize) -> Platform {
    let p = 1 + (seed as usize % max_p);
    let family = [Family::Bus, Family::Star(0.5), Family::MixedZ][seed as usize % 3];
    random_platform(r, p, family)
}

pub fn random_platform(r: &mut ChaCha8Rng, p: usize, family: Family) -> Platform {
    let c0 = r.random_range(0.01..1.0);
    let workers = (0..p)
        .map(|i| {
            let w = r.random_range(0.1..10.0);
            let (c, d) = match family {
                Family::Bus => (c0, 0.5 * c0),
                Family::Star(z) => {
                    let c = r.random_range(0.01..1.0);
                    (c, z * c)
                }
                Family::MixedZ => (r.random_range(0.01..1.0), r.random_range(0.0..1.0)),
            };
            Worker::new(format!("w{i}"), c, w, d)
        })
        .collect();
    Platform::new(workers).expect("valid random platform")
}

pub fn permutations(n: usize) -> Vec<Vec<usize>> {
    fn rec(prefix: &mut Vec<usize>, used: &mut Vec<bool>, out: &mut Vec<Vec<usize>>) {
        if prefix.len() == used.len() {
            out.push(prefix.clone());
            return;
        }
        for i in 0..used.len() {
            if !used[i] {
                used[i] = true;
                prefix.push(i);
                rec(prefix, used, out);
                prefix.pop();
                used[i] = false;
            }
        }
    }
    let mut out = Vec::new();
    rec(&mut Vec::new(), &mut vec![false; n], &mut out);
    out
}

pub fn assert_close(a: f64, b: f64, rel: f64, what: &str) {
    assert!(
        (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-12),
        "{what}: {a} vs {b} (rel diff {})",
        (a - b).abs() / a.abs().max(b.abs())
    );
}
