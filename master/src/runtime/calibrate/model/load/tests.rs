//! Costs under load against closed cases: steady states, factors, the
//! window of chunks a pipeline holds, and sizes past the largest probe.

use super::*;

const ALONE: Alone = Alone {
    c: 0.04,
    w: 0.01,
    d: 0.02,
    ret_latency: 0.0,
    room: 64,
    largest: 64,
};

/// A pipeline of five 3-unit chunks that arrive, are computed and come
/// back every `recv`, `comp` and `ret` seconds, after a fill; each
/// computed in 0.03 s as the worker timed it (its cost alone).
fn spaced(recv: f64, comp: f64, ret: f64) -> Pipeline {
    let at = |first: f64, every: f64| (0..5).map(|j| first + j as f64 * every).collect();
    Pipeline {
        units: 3,
        received: at(0.5, recv),
        ready: at(0.6, comp),
        back: at(0.9, ret),
        computed: vec![0.03; 5],
    }
}

#[test]
fn the_steady_state_is_the_slowest_spacing_a_unit() {
    // Arrivals every 0.15 s for 3 units: 0.05 s a unit; the fill (0.5 s
    // before the first) does not count.
    let c = spaced(0.15, 0.12, 0.06).cycle().expect("five chunks");
    assert!((c - 0.05).abs() < 1e-12, "{c}");
    // Results coming back slowest set it.
    let c = spaced(0.12, 0.12, 0.3).cycle().expect("five chunks");
    assert!((c - 0.1).abs() < 1e-12, "{c}");
    let one = Pipeline {
        units: 3,
        received: vec![0.1],
        ready: vec![0.2],
        back: vec![0.3],
        computed: vec![0.03],
    };
    assert_eq!(one.cycle(), None);
    assert_eq!(one.computing(), None);
    assert_eq!(one.returning(), None);
}

#[test]
fn the_factor_is_the_mean_steady_state_over_the_slowest_phase_alone() {
    // Slowest phase alone: the send, 0.04 s a unit (0.12 s a chunk).
    let f = factor(&ALONE, &[spaced(0.18, 0.1, 0.1), spaced(0.168, 0.1, 0.1)]);
    assert!((f - 1.45).abs() < 1e-9, "{f}");
    // Within the noise, or faster than alone: none.
    assert_eq!(factor(&ALONE, &[spaced(0.123, 0.1, 0.1)]), 1.0);
    assert_eq!(factor(&ALONE, &[spaced(0.1, 0.1, 0.1)]), 1.0);
    assert_eq!(factor(&ALONE, &[]), 1.0);
}

/// Six chunks of 3 arriving every 0.12 s (the link: 0.04 s a unit, the
/// steady state), each computed in `comp` s as the worker timed it (the
/// first, on cold caches, 0.2 s) and back 0.06 s after it was ready
/// (0.02 s a unit: the return's cost alone).
fn timed(comp: f64) -> Pipeline {
    let at = |first: f64| (0..6).map(|j| first + j as f64 * 0.12).collect::<Vec<f64>>();
    let mut computed = vec![comp; 6];
    computed[0] = 0.2;
    Pipeline {
        units: 3,
        received: at(0.5),
        ready: at(0.5 + comp),
        back: at(0.56 + comp),
        computed,
    }
}

#[test]
fn computing_slower_than_alone_raises_its_own_factor() {
    // Computed in 0.06 s a chunk: 0.02 a unit, twice its 0.01 alone.
    let p = timed(0.06);
    assert!((p.computing().expect("six chunks") - 0.02).abs() < 1e-12);
    let [fc, fw, fd] = factors(&ALONE, &[p.clone(), p.clone()]);
    assert_eq!((fc, fd), (1.0, 1.0), "the steady state is the link's");
    assert!((fw - 2.0).abs() < 1e-9, "{fw}");
    // The master hears a chunk is computed only once the results before
    // it are written: `Ready` every 0.12 s, just as the return before
    // it is back, though the worker timed 0.03 s a chunk (its cost
    // alone): no factor of its own.
    let queued = Pipeline {
        ready: p.back.iter().map(|b| b + 1e-4).collect(),
        back: p.back.iter().map(|b| b + 0.06).collect(),
        computed: vec![0.03; 6],
        ..p.clone()
    };
    assert!((queued.computing().expect("six chunks") - 0.01).abs() < 1e-12);
    assert_eq!(factors(&ALONE, &[queued]), [1.0; 3]);
    assert_eq!(factors(&ALONE, &[]), [1.0; 3]);
    // A cost alone at calibration's floor: a factor a file can hold.
    let floor = Alone { w: 1e-12, ..ALONE };
    assert_eq!(
        factors(&floor, std::slice::from_ref(&p))[1],
        crate::config::platform_file::MAX_UNDER_LOAD
    );
    // Computing a fiftieth of the link's time alone (0.0008 s a unit
    // against 0.04): 1.6× adds 0.00048 s a unit, 1.2% of the slowest
    // phase, under TUNING.worth: the steady state's factor throughout. At
    // three times that cost, 1.6× adds 3.6%, still under; at ten
    // times (0.008 s), 12%: kept.
    for (w, kept) in [(0.0008, false), (0.0024, false), (0.008, true)] {
        let small = Alone { w, ..ALONE };
        let q = timed(3.0 * 1.6 * w);
        assert!((q.computing().expect("six chunks") / w - 1.6).abs() < 1e-9);
        let [fc, fw, fd] = factors(&small, &[q]);
        assert_eq!((fc, fd), (1.0, 1.0));
        let want = if kept { 1.6 } else { 1.0 };
        assert!((fw - want).abs() < 1e-9, "w {w}: {fw}");
    }
}

#[test]
fn a_return_counts_from_when_it_could_leave() {
    // Chunks of 3, each return 0.06 s (0.02 a unit, its cost alone),
    // back to back but for a fill: the third chunk was computed late
    // (0.46 s) and its return waited for it. Spaced by 0.08 s on
    // average over the six, 1.33× alone; timed from when each could
    // leave, 0.02 a unit: no factor.
    let p = Pipeline {
        units: 3,
        received: vec![0.1, 0.15, 0.4, 0.41, 0.42, 0.43],
        ready: vec![0.25, 0.3, 0.46, 0.47, 0.5, 0.55],
        back: vec![0.3, 0.36, 0.52, 0.58, 0.64, 0.7],
        computed: vec![0.03; 6],
    };
    let spacing = (p.back[5] - p.back[0]) / 5.0 / 3.0;
    assert!((spacing / ALONE.d - 4.0 / 3.0).abs() < 1e-9);
    assert!((p.returning().expect("six chunks") - 0.02).abs() < 1e-12);
    assert_eq!(factors(&ALONE, std::slice::from_ref(&p))[2], 1.0);
    // Each return taking 0.09 s once it may leave: 1.5× alone, whatever
    // the steady state's factor (the sends' here, 1.0).
    let slow = Pipeline {
        back: p
            .ready
            .iter()
            .scan(0.0_f64, |last, &r| {
                *last = last.max(r) + 0.09;
                Some(*last)
            })
            .collect(),
        ..p
    };
    assert!((slow.returning().expect("six chunks") - 0.03).abs() < 1e-12);
    let [fc, _, fd] = factors(&ALONE, &[slow]);
    assert_eq!(fc, 1.0);
    assert!((fd - 1.5).abs() < 1e-9, "{fd}");
}

#[test]
fn chunks_take_about_their_target_and_a_window_of_them_fits_the_room() {
    // The send is the slowest phase: 0.25 s / 1/32 s.
    let fast = Alone { c: 0.03125, ..ALONE };
    assert_eq!(units(&fast), 8);
    // Four chunks held at once within 32 units: 8 each still; within
    // 8, 2; within 2, one (fewer than four held).
    assert_eq!(units(&Alone { room: 32, ..fast }), 8);
    assert_eq!(units(&Alone { room: 8, ..fast }), 2);
    assert_eq!(units(&Alone { room: 2, ..fast }), 1);
    assert_eq!(units(&Alone { c: 10.0, ..ALONE }), 1);
    // Two seconds of the slowest phase: 8 chunks of 0.25 s; 16 (not 64)
    // of 1/32 s; of one second, the fewest; of 10 s, the fewest.
    assert_eq!(chunks(&fast, 8), Some(8));
    assert_eq!(chunks(&fast, 1), Some(TUNING.chunks));
    let roomy = Alone { room: 1000, ..fast };
    assert_eq!(chunks(&roomy, 32), Some(TUNING.min_chunks));
    assert_eq!(chunks(&Alone { c: 10.0, ..ALONE }, 1), Some(TUNING.min_chunks));
    // The room holds a window, not the whole pipeline: four chunks of 8
    // within 64 units (eight would fit), three within 24, two within
    // 20: too few to overlap the three phases.
    assert_eq!(window(&fast, 8), TUNING.window);
    assert_eq!(window(&Alone { room: 24, ..fast }, 8), 3);
    assert_eq!(chunks(&Alone { room: 24, ..fast }, 8), Some(8));
    assert_eq!(chunks(&Alone { room: 20, ..fast }, 8), None);
    // Products of 256×256 behind 480 Mbit/s (19 ms a unit), memory for
    // 1365: eight chunks of 13 (0.25 s each), four held at once, where
    // the whole pipeline once had to fit the largest probe (16 units):
    // sixteen chunks of one, 0.3 s in all.
    let b = Alone {
        c: 0.0189,
        w: 0.0015,
        d: 0.0092,
        ret_latency: 0.0,
        room: room(16, 1365),
        largest: 16,
    };
    assert_eq!(
        (units(&b), chunks(&b, 13), window(&b, 13)),
        (13, Some(8), TUNING.window)
    );
    // On loopback (0.3 ms a unit) 0.25 s would be 833 units; the
    // largest probe, 16, is the most: sixteen chunks of 5 ms.
    let quick = Alone {
        c: 0.0003,
        w: 0.0001,
        d: 0.0002,
        ret_latency: 0.0,
        room: 1000,
        largest: 16,
    };
    assert_eq!((units(&quick), chunks(&quick, 16)), (16, Some(TUNING.chunks)));
}

#[test]
fn a_product_larger_than_the_largest_probe_still_gets_a_pipeline() {
    // 768×768 on the test bed: the largest probe one unit, memory for
    // 892. Half of it is room; chunks of one (the largest probe, 0.17
    // s), twelve of them in two seconds, four held at once.
    let large = Alone {
        c: 0.166,
        w: 0.12,
        d: 0.078,
        ret_latency: 0.0,
        room: room(1, 892),
        largest: 1,
    };
    assert_eq!(large.room, 446);
    assert_eq!(units(&large), 1);
    assert_eq!(chunks(&large, 1), Some(12));
    assert_eq!(window(&large, 1), TUNING.window);
    // Memory for twenty products: ten of room, four chunks held.
    assert_eq!(room(1, 20), 10);
    let twenty = Alone { room: 10, ..large };
    assert_eq!((units(&twenty), window(&twenty, 1)), (1, TUNING.window));
    // With the largest probe alone it had none.
    assert_eq!(chunks(&Alone { room: 1, ..large }, 1), None);
    // Where the largest probe holds more than half the memory, it is
    // the room.
    assert_eq!(room(16, 8035), 4017);
    assert_eq!(room(16, 20), 16);
    // Memory for four products: two of them, too few for a pipeline.
    assert_eq!(room(1, 4), 2);
    let four = Alone {
        room: room(1, 4),
        ..large
    };
    assert_eq!(units(&four), 1);
    assert_eq!(chunks(&four, 1), None);
}
