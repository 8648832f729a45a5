//! The product machine against a simulated platform: with the planned
//! costs it reproduces the plan's timing rule to the nanosecond; the port
//! never carries more than its model allows (one transfer, one each way,
//! or behind an uplink several sends, one per worker, each at its share
//! of the uplink); a worker lost at any point
//! leaves C whole, each element stored once, by the survivors.

use super::*;
use dls_lp::product::{plan_product, Port, ProductRequest, ProductWorker};
use std::collections::BTreeMap;

/// A simulated platform: workers at their true costs, events due by time
/// then order of arrival.
struct Sim {
    truth: Vec<ProductWorker>,
    queue: BTreeMap<(u64, u64), (usize, Input)>,
    seq: u64,
    busy: Vec<f64>,
    /// Transfers on the port now: (is a send, worker, end time).
    port: Vec<(bool, usize, f64)>,
    /// The plan's port: sends at once and the uplink's share of each.
    model: Port,
    stored: Vec<Rect>,
    dead: Vec<bool>,
    /// Per worker: the panel the last one said would come next.
    promised: Vec<Option<(Rect, std::ops::Range<usize>)>>,
    /// Panels that came as promised, and those that did not.
    kept: (usize, usize),
}

fn key(t: f64) -> u64 {
    (t * 1e12).round() as u64
}

impl Sim {
    fn new(truth: Vec<ProductWorker>, model: Port) -> Sim {
        let p = truth.len();
        Sim {
            truth,
            queue: BTreeMap::new(),
            seq: 0,
            busy: vec![0.0; p],
            port: Vec::new(),
            model,
            stored: Vec::new(),
            dead: vec![false; p],
            promised: vec![None; p],
            kept: (0, 0),
        }
    }

    fn at(&mut self, t: f64, w: usize, input: Input) {
        self.seq += 1;
        self.queue.insert((key(t), self.seq), (w, input));
    }

    /// A transfer starts: the port must admit it.
    fn enter(&mut self, send: bool, worker: usize, now: f64, end: f64) {
        self.port.retain(|&(_, _, e)| e > now + 1e-12);
        let same = self.port.iter().filter(|(s, _, _)| *s == send).count();
        if !self.model.duplex {
            assert!(self.port.is_empty(), "two transfers at once on one port");
        } else if send {
            assert!(same < self.model.sends, "{} sends at once", same + 1);
            assert!(
                !self.port.iter().any(|&(s, w, _)| s && w == worker),
                "two sends to worker {worker} at once"
            );
        } else {
            assert_eq!(same, 0, "two returns at once");
        }
        self.port.push((send, worker, end));
    }

    fn carry_out(&mut self, m: &ProductMachine, cmds: Vec<Command>, now: f64) {
        for c in cmds {
            match c {
                Command::Panel {
                    worker,
                    piece,
                    rect,
                    ks,
                    then,
                    ..
                } => {
                    if let Some(p) = self.promised[worker].take() {
                        match p == (rect, ks.clone()) {
                            true => self.kept.0 += 1,
                            false => self.kept.1 += 1,
                        }
                    }
                    self.promised[worker] = then;
                    let values = (ks.len() * (rect.height + rect.width)) as f64;
                    // Its link, or its share of the uplink, whichever is slower.
                    let share = self.model.sends as f64 * self.model.uplink;
                    let end = now + self.truth[worker].send.max(share) * values;
                    self.enter(true, worker, now, end);
                    self.at(end, worker, Input::Received(piece));
                    let flops = 2.0 * (rect.height * rect.width * ks.len()) as f64;
                    self.busy[worker] = self.busy[worker].max(end) + self.truth[worker].flop * flops;
                    let t = self.busy[worker];
                    self.at(t, worker, Input::Ready(piece, 0.0));
                }
                Command::Grant { worker, piece } => {
                    let rect = m.expected(worker, piece).expect("a granted return has a rectangle");
                    let end = now + self.truth[worker].ret * rect.area() as f64;
                    self.enter(false, worker, now, end);
                    self.at(end, worker, Input::Results(piece));
                }
                Command::Store { rect, .. } => self.stored.push(rect),
                Command::Release { .. } => {}
            }
        }
    }

    /// Run to the end; `kill` loses a worker at a time.
    fn run(&mut self, m: &mut ProductMachine, kill: Option<(usize, f64)>) -> f64 {
        let cmds = m.start(0.0);
        self.carry_out(m, cmds, 0.0);
        if let Some((w, t)) = kill {
            self.at(t, w, Input::Lost("killed".into()));
        }
        let mut now = 0.0;
        while let Some(((t, _), (w, input))) = self.queue.pop_first() {
            now = t as f64 / 1e12;
            if self.dead[w] {
                continue;
            }
            if matches!(input, Input::Lost(_)) {
                self.dead[w] = true;
                // Its transfers on the port end with it.
                self.port.retain(|&(_, x, _)| x != w);
            }
            let cmds = m.on_event(w, input, now);
            self.carry_out(m, cmds, now);
            if *m.status() != Status::Running {
                break;
            }
        }
        now
    }
}

fn star() -> Vec<ProductWorker> {
    [
        (2e-8, 1e-8, 1e-9),
        (1e-8, 2e-8, 3e-9),
        (4e-8, 4e-8, 2e-9),
        (1e-8, 1e-8, 6e-9),
    ]
    .iter()
    .map(|&(send, ret, flop)| ProductWorker {
        send,
        ret,
        flop,
        memory: Some(20_000),
    })
    .collect()
}

/// The ports the tests run on: one, one each way, and a shared
/// full-duplex uplink carrying about two of the star's links.
const PORTS: [(bool, f64); 3] = [(false, 0.0), (true, 0.0), (true, 8e-9)];

fn request((duplex, uplink): (bool, f64)) -> ProductRequest {
    let mut req = ProductRequest::new(300, 250, 280);
    req.duplex = duplex;
    req.uplink = uplink;
    req.panel_values = 8_000;
    req
}

fn covered_once(stored: &[Rect], n: usize, m: usize) {
    let mut seen = vec![0u8; n * m];
    for r in stored {
        for i in r.row..r.row + r.height {
            for j in r.col..r.col + r.width {
                seen[i * m + j] += 1;
            }
        }
    }
    assert!(seen.iter().all(|&s| s == 1), "C not covered exactly once");
}

#[test]
fn with_the_planned_costs_the_run_is_the_plan() {
    for ports in PORTS {
        let ws = star();
        let plan = plan_product(&ws, &request(ports)).expect("plans");
        assert!(plan.pieces.len() > plan.enrolled.len(), "memory cuts pieces");
        assert_eq!(plan.port.sends > 1, ports.1 > 0.0, "{:?}", plan.port);
        let mut m = ProductMachine::new(ws.clone(), &plan);
        let mut sim = Sim::new(ws, plan.port);
        let end = sim.run(&mut m, None);
        assert_eq!(*m.status(), Status::Done);
        assert!(
            (end - plan.makespan()).abs() <= 1e-9 * plan.makespan(),
            "{end} vs {}",
            plan.makespan()
        );
        covered_once(&sim.stored, 300, 280);
        // Every panel but each worker's first came as the one before said.
        let panels: usize = plan.pieces.iter().map(|p| p.panels.len()).sum();
        assert_eq!(sim.kept, (panels - plan.enrolled.len(), 0));
        assert!(
            sim.promised.iter().all(Option::is_none),
            "a last panel promised another"
        );
        for t in &m.finish().transfers {
            let (s, e) = t.predicted.expect("planned");
            assert!((t.start - s).abs() < 1e-9 && (t.end - e).abs() < 1e-9, "{t:?}");
        }
    }
}

#[test]
fn a_worker_lost_at_any_point_leaves_c_whole() {
    for ports in PORTS {
        let ws = star();
        let plan = plan_product(&ws, &request(ports)).expect("plans");
        let span = plan.makespan();
        for w in plan.enrolled.clone() {
            for f in [0.0, 0.1, 0.37, 0.8, 0.99] {
                let mut m = ProductMachine::new(ws.clone(), &plan);
                let mut sim = Sim::new(ws.clone(), plan.port);
                let end = sim.run(&mut m, Some((w, f * span)));
                assert_eq!(*m.status(), Status::Done, "worker {w} lost at {f}");
                covered_once(&sim.stored, 300, 280);
                let measured = m.finish();
                assert!(end >= span * (1.0 - 1e-9) || measured.losses[0].elements == 0);
                assert_eq!(measured.losses.len(), 1);
            }
        }
    }
}

#[test]
fn with_every_worker_lost_the_product_fails_by_name() {
    let ws = star();
    let plan = plan_product(&ws, &request(PORTS[0])).expect("plans");
    let mut m = ProductMachine::new(ws.clone(), &plan);
    m.start(0.0);
    for w in 0..ws.len() {
        m.on_event(w, Input::Lost("gone".into()), 1e-6 * w as f64);
    }
    match m.status() {
        Status::Failed(why) => assert!(why.contains("every worker"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_worker_saying_what_it_was_not_asked_is_lost() {
    let ws = star();
    let plan = plan_product(&ws, &request(PORTS[0])).expect("plans");
    let mut m = ProductMachine::new(ws.clone(), &plan);
    let first = m.start(0.0);
    let Some(Command::Panel { worker, .. }) = first.first().cloned() else {
        panic!("starts with a panel: {first:?}")
    };
    // Results it was never granted.
    let cmds = m.on_event(worker, Input::Results(ChunkId(0)), 0.5);
    assert!(cmds.contains(&Command::Release { worker, cancel: true }), "{cmds:?}");
    assert!(m.finish().losses[0].reason.contains("not granted"));
}
