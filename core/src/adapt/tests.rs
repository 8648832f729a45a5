use super::*;

fn star(ws: &[f64]) -> Platform {
    Platform::new(
        ws.iter()
            .enumerate()
            .map(|(i, &w)| Worker::new(format!("w{i}"), 0.01, w, 0.01))
            .collect(),
    )
    .expect("valid")
}

#[test]
fn estimates_cover_a_span_skip_the_warm_up_and_pass_a_dead_band() {
    // A batch of 10 s: estimates cover at least 1 s predicted.
    let mut o = Observed::new(2, 10.0);
    assert_eq!(o.factor(0, Phase::Compute), 1.0);
    // The first chunk, three times slower (cold caches): not used.
    o.see(0, Phase::Compute, 1.5, 0.5);
    for x in [1.05, 0.97, 1.02] {
        o.see(0, Phase::Compute, x * 0.5, 0.5);
    }
    assert!(
        (o.factor(0, Phase::Compute) - 3.04 / 3.0).abs() < 1e-12,
        "ratio of the sums"
    );
    assert!(!o.changed(), "noise within the dead band");
    // Fewer than three observations: no estimate yet.
    o.see(1, Phase::Compute, 1.0, 1.0);
    o.see(1, Phase::Compute, 1.3, 1.0);
    o.see(1, Phase::Compute, 1.3, 1.0);
    assert_eq!(o.factor(1, Phase::Compute), 1.0);
    assert!(!o.changed(), "two observations move nothing");
    o.see(1, Phase::Compute, 1.3, 1.0);
    assert!((o.factor(1, Phase::Compute) - 1.3).abs() < 1e-12);
    assert!(o.changed());
    // Short transfers: no estimate until they cover the span.
    o.see(1, Phase::Send, 0.125, 0.125);
    for _ in 0..7 {
        o.see(1, Phase::Send, 0.25, 0.125);
    }
    assert_eq!(o.factor(1, Phase::Send), 1.0, "0.875 s of 1 s covered");
    o.see(1, Phase::Send, 0.25, 0.125);
    assert!((o.factor(1, Phase::Send) - 2.0).abs() < 1e-12);
    // A lasting slowdown: the oldest observations leave the window.
    o.see(0, Phase::Return, 1.0, 1.0);
    for _ in 0..5 {
        o.see(0, Phase::Return, 1.0, 1.0);
    }
    for _ in 0..3 {
        o.see(0, Phase::Return, 3.0, 1.0);
    }
    assert!((o.factor(0, Phase::Return) - 3.0).abs() < 1e-12);
    // Bad observations are ignored (they do not even warm up).
    for bad in [(f64::NAN, 1.0), (1.0, 0.0), (-1.0, 1.0), (1.0, f64::INFINITY)] {
        o.see(1, Phase::Return, bad.0, bad.1);
    }
    for _ in 0..3 {
        o.see(1, Phase::Return, 1.0, 1.0);
    }
    assert_eq!(o.factor(1, Phase::Return), 1.0, "the first good one warms up");
    let p = o.corrected(&star(&[1.0, 2.0]));
    assert!((p.workers()[1].w - 2.6).abs() < 1e-12);
    assert!((p.workers()[0].d - 0.03).abs() < 1e-12);
    assert!((p.workers()[1].c - 0.02).abs() < 1e-12);
    assert!(!o.changed(), "the estimates in use");
}

#[test]
fn a_slower_worker_gets_less_and_totals_stay() {
    // Two equal compute-bound workers, round of 20: 10 and 10. Worker 1
    // becomes 3× slower: steady-state shares 1 : 1/3, so 15 and 5.
    let slots = [
        Slot {
            worker: 0,
            round: 4,
            units: 10,
        },
        Slot {
            worker: 1,
            round: 4,
            units: 10,
        },
    ];
    let same = reshare(&star(&[1.0, 1.0]), Ports::One, &slots, &[], |_| u64::MAX, &[]);
    assert_eq!(same, None, "nothing to change");
    let got = reshare(&star(&[1.0, 3.0]), Ports::One, &slots, &[], |_| u64::MAX, &[])
        .expect("changes")
        .sizes;
    assert_eq!(got, [15, 5]);
    // With worker 0 capped at 12 products, the rest goes to worker 1.
    let got = reshare(
        &star(&[1.0, 3.0]),
        Ports::One,
        &slots,
        &[],
        |w| if w == 0 { 12 } else { 100 },
        &[],
    )
    .expect("changes")
    .sizes;
    assert_eq!(got, [12, 8]);
    // Caps that cannot hold the round: keep it as it was.
    assert_eq!(reshare(&star(&[1.0, 3.0]), Ports::One, &slots, &[], |_| 9, &[]), None);
}

#[test]
fn behind_a_shared_uplink_products_go_only_where_the_port_can_carry_them() {
    // The fastest link (d), slowed to 0.065 s a unit, takes 0.76 of the
    // uplink (0.0496 s a unit), the next (c, 0.0816) 0.61: the port sends
    // to c beside d only in the room d leaves below TUNING.fill, at
    // (TUNING.fill - 0.76) / 0.61 of c's rate, and d's sends fill the time. The
    // bound's rates would give c the uplink's rest (1/0.0496 − 1/0.065 =
    // 4.8 of 20.2 units a second, a quarter); the port carries 1.75.
    let p = Platform::new(vec![
        Worker::new("d", 0.065, 0.02, 0.03),
        Worker::new("c", 0.0816, 0.02, 0.04),
    ])
    .expect("valid");
    let u = dls_lp::Uplink {
        send: 0.0496,
        ret: 0.02,
        duplex: true,
    };
    let room = (dls_lp::TUNING.fill - 0.0496 / 0.065) / (0.0496 / 0.0816);
    let part = |d_rate: f64, c_rate: f64| (107.0 * c_rate / (d_rate + c_rate)).round() as u64;
    let slots = [(0, 100), (1, 7)].map(|(worker, units)| Slot {
        worker,
        round: 3,
        units,
    });
    let share = part(1.0 / 0.065, room / 0.0816);
    assert_eq!(share, 11);
    let got = reshare(&p, Ports::Shared(u), &slots, &[], |_| u64::MAX, &[]).expect("changes");
    assert_eq!(got.sizes, [107 - share, share]);
    // A processor that holds d to 10 units a second leaves the lane 35%
    // of the time: c's link fills it, and takes the room of the rest
    // (5.4 units a second). d comes first although c could take more
    // alone (12.3): d uses the lane's time better.
    let slow = Platform::new(vec![Worker::new("d", 0.065, 0.1, 0.03), p.workers()[1].clone()]).expect("valid");
    // c's share (38 of 107) is more than twice its 7: it grows to 14, then
    // 28, then its share, a correction at a time, each kept to `TUNING.growth`.
    let c_rate: f64 = (1.0 - 10.0 * 0.065 + 10.0 * 0.065 * room) / 0.0816;
    let share = part(10.0, c_rate);
    assert_eq!(share, 38);
    let mut now = slots;
    let mut steps = Vec::new();
    while let Some(got) = reshare(&slow, Ports::Shared(u), &now, &[], |_| u64::MAX, &[]) {
        assert_eq!(got.sizes.iter().sum::<u64>(), 107, "every product kept: {got:?}");
        assert!(got.sizes[1] <= 2 * now[1].units, "{got:?} from {now:?}");
        assert_eq!(got.grown.is_empty(), got.sizes[1] == share, "{got:?}");
        now[0].units = got.sizes[0];
        now[1].units = got.sizes[1];
        steps.push(got.sizes[1]);
        assert!(steps.len() < 10, "{steps:?}");
    }
    assert_eq!(steps, [14, 28, share]);
}

#[test]
fn a_part_seen_small_grows_at_most_twofold_in_one_correction() {
    // Two links nearly alike behind an uplink that either fills: the busy
    // one (d, 271 products planned) seen 1.28× slower than calibrated,
    // the other (c, 29, one every few rounds) at its calibrated speed,
    // now 4% faster. The port's rates put c's link first and give d none;
    // c may take twice its part, and d keeps the rest.
    let p = Platform::new(vec![
        Worker::new("d", 0.0212 * 1.28, 0.0072, 0.0097),
        Worker::new("c", 0.0259, 0.0076, 0.0130),
    ])
    .expect("valid");
    let u = dls_lp::Uplink {
        send: 0.0192,
        ret: 0.009,
        duplex: true,
    };
    let mut slots: Vec<Slot> = (0..200)
        .map(|round| Slot {
            worker: 0,
            round,
            units: 1,
        })
        .collect();
    slots.extend((0..25).map(|k| Slot {
        worker: 1,
        round: 7 * k,
        units: 1,
    }));
    let free = reshare(&p, Ports::Shared(u), &slots, &[], |_| u64::MAX, &[]);
    let got = free.expect("changes");
    let part = |w: usize| -> u64 {
        (0..slots.len())
            .filter(|&k| slots[k].worker == w)
            .map(|k| got.sizes[k])
            .sum()
    };
    assert_eq!(part(1), 50, "{got:?}");
    assert_eq!(part(0), 175);
    assert_eq!(got.grown, [1]);
}

#[test]
fn work_already_held_counts_before_the_share() {
    let slots = [0, 1].map(|worker| Slot {
        worker,
        round: 4,
        units: 10,
    });
    // Rates 1 and 1/3 a second; worker 1 still holds 8 s of work. All
    // finish together at T = 17: worker 0 takes 17, worker 1
    // (17 − 8)/3 = 3 (were it free: 15 and 5).
    let got = reshare(&star(&[1.0, 3.0]), Ports::One, &slots, &[0.0, 8.0], |_| u64::MAX, &[]);
    assert_eq!(got.expect("changes").sizes, [17, 3]);
    // Holding more than all the rest takes: nothing more.
    let got = reshare(&star(&[1.0, 3.0]), Ports::One, &slots, &[0.0, 100.0], |_| u64::MAX, &[]);
    assert_eq!(got.expect("changes").sizes, [20, 0]);
}

#[test]
fn levels_finish_together() {
    // Closed forms: equal rates, busy 0 and 2, 4 units: T = 3.
    assert_eq!(level(4.0, &[1.0, 1.0], &[0.0, 2.0]), [3.0, 1.0]);
    // Nobody busy: in proportion to the rates.
    assert_eq!(level(6.0, &[2.0, 1.0], &[0.0, 0.0]), [4.0, 2.0]);
    // A worker of rate 0 gets nothing; the third is too busy to start.
    assert_eq!(level(3.0, &[1.0, 0.0, 1.0], &[1.0, 0.0, 9.0]), [3.0, 0.0, 0.0]);
    // Against brute force: T found by bisection, on random cases.
    let mut x = 0x9e3779b97f4a7c15u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 1000) as f64 / 100.0
    };
    for _ in 0..200 {
        let n = 1 + (rnd() as usize % 5);
        let rate: Vec<f64> = (0..n).map(|_| rnd() + 0.01).collect();
        let busy: Vec<f64> = (0..n).map(|_| rnd()).collect();
        let total = rnd() * 10.0;
        let sum = |t: f64| -> f64 { rate.iter().zip(&busy).map(|(r, b)| r * (t - b).max(0.0)).sum() };
        let (mut lo, mut hi) = (0.0, 1e6);
        for _ in 0..200 {
            let mid = (lo + hi) / 2.0;
            if sum(mid) < total {
                lo = mid
            } else {
                hi = mid
            }
        }
        let got = level(total, &rate, &busy);
        for (i, g) in got.iter().enumerate() {
            let want = rate[i] * (lo - busy[i]).max(0.0);
            assert!(
                (g - want).abs() < 1e-6 * (1.0 + want),
                "{rate:?} {busy:?} {total}: {got:?}"
            );
        }
    }
}

#[test]
fn many_small_rounds_share_without_a_rounding_bias() {
    // 40 rounds of 3 products over 4 compute-bound workers whose
    // speeds are 6 : 3 : 2 : 1: 120 products, so 60, 30, 20 and 10.
    // Shared round by round, 3 products would go 2 : 1 : 0 : 0 (or
    // similar) every time, and the two slowest would get nothing.
    let p = star(&[1.0, 2.0, 3.0, 6.0]);
    let slots: Vec<Slot> = (0..40)
        .flat_map(|round| {
            (0..4).map(move |worker| Slot {
                worker,
                round,
                units: u64::from(worker != 3),
            })
        })
        .collect();
    let got = reshare(&p, Ports::One, &slots, &[], |_| u64::MAX, &[])
        .expect("changes")
        .sizes;
    assert_eq!(got.iter().sum::<u64>(), 120, "every product kept");
    for (w, want) in [60u64, 30, 20, 10].into_iter().enumerate() {
        let mine: Vec<u64> = (0..slots.len())
            .filter(|&k| slots[k].worker == w)
            .map(|k| got[k])
            .collect();
        assert_eq!(mine.iter().sum::<u64>(), want, "worker {w}: {mine:?}");
        let (lo, hi) = (mine.iter().min().copied(), mine.iter().max().copied());
        assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "worker {w}: {mine:?}");
        assert!(mine[0] >= mine[mine.len() - 1], "the larger chunks first: {mine:?}");
    }
}

#[test]
fn capped_split_fills_and_shares_again() {
    let none = [0.0; 3];
    assert_eq!(
        capped_split(10, &[1.0, 1.0, 2.0], &none, &[10, 1, 10]),
        Some(vec![3, 1, 6])
    );
    assert_eq!(capped_split(5, &[1.0, 0.0], &none[..2], &[3, 10]), None);
    assert_eq!(capped_split(0, &[1.0], &none[..1], &[0]), Some(vec![0]));
    // What the weighted cannot hold goes to the others by `then`: 3 to the
    // first (its cap), the 7 left 1 : 6 by the second weights.
    assert_eq!(
        capped_split(10, &[1.0, 0.0, 0.0], &[5.0, 1.0, 6.0], &[3, 10, 10]),
        Some(vec![3, 1, 6])
    );
    // Still nowhere to go: refused.
    assert_eq!(capped_split(10, &[1.0, 0.0], &[1.0, 0.0], &[3, 10]), None);
}

#[test]
fn a_capped_correction_is_shared_again_once_the_grown_are_seen() {
    // A batch of 10 s: the span is 1 s predicted.
    let mut o = Observed::new(2, 10.0);
    let _ = o.corrected(&star(&[1.0, 1.0]));
    assert!(!o.changed());
    o.watch(&[1]);
    // Worker 0's observations do not count for worker 1.
    for _ in 0..5 {
        o.see(0, Phase::Send, 0.5, 0.5);
    }
    assert!(!o.changed(), "worker 1 not seen yet");
    // Worker 1 at its calibrated pace: 0.9 s of 1 s, then the span.
    for _ in 0..3 {
        o.see(1, Phase::Compute, 0.3, 0.3);
    }
    assert!(!o.changed(), "0.9 s of 1 s seen");
    o.see(1, Phase::Return, 0.2, 0.2);
    assert!(o.changed(), "seen for the span: share again");
    // Sharing again ends the watch (until a correction is capped again).
    let _ = o.corrected(&star(&[1.0, 1.0]));
    assert!(!o.changed());
    o.watch(&[1]);
    o.see(1, Phase::Compute, 0.5, 0.5);
    assert!(!o.changed(), "the seconds seen before count no more");
}
