//! The exchange machine against a simulated platform that passes parts
//! on as the plan's rule does: with the planned costs the run ends when
//! the plan says, each master send goes out once, each band of C is
//! stored once and C is covered; a worker lost ends the run, named.

use super::*;
use dls_lp::product::{plan_product, Port, ProductRequest, ProductWorker};
use std::collections::BTreeMap;

/// A simulated switched star.
struct Sim {
    truth: Vec<ProductWorker>,
    port: Port,
    plan: ExchangeTiming,
    rects: Vec<Option<Rect>>,
    queue: BTreeMap<(u64, u64), (usize, Input)>,
    seq: u64,
    down_free: Vec<f64>,
    up_free: Vec<f64>,
    /// Per worker, per stage: parts still due, and when the last came.
    due: Vec<Vec<(usize, f64)>>,
    /// Per worker: stages added so far, and when the last was.
    adds: Vec<(usize, f64)>,
    stored: Vec<Rect>,
    sends: Vec<usize>,
}

fn key(t: f64) -> u64 {
    (t * 1e12).round() as u64
}

impl Sim {
    fn new(truth: Vec<ProductWorker>, plan: &dls_lp::product::ProductPlan) -> Sim {
        let x = plan.exchange.clone().expect("an exchange");
        let p = truth.len();
        let mut rects = vec![None; p];
        for r in &plan.rects {
            rects[r.worker] = Some(*r);
        }
        let mut due = vec![Vec::new(); p];
        for r in &plan.rects {
            due[r.worker] = (0..x.stages())
                .map(|t| {
                    let parts = (0..x.groups.len())
                        .filter(|&g| x.groups[g].members.contains(&r.worker))
                        .filter(|&g| !matches!(x.part(g, t), Part::Rows(_)) || t < x.steps.len())
                        .count();
                    (parts, 0.0)
                })
                .collect();
        }
        Sim {
            truth,
            port: Port {
                sends: plan.port.at_once(),
                ..plan.port
            },
            plan: x,
            rects,
            queue: BTreeMap::new(),
            seq: 0,
            down_free: vec![0.0; p],
            up_free: vec![0.0; p],
            due,
            adds: vec![(0, 0.0); p],
            stored: Vec::new(),
            sends: Vec::new(),
        }
    }

    fn at(&mut self, t: f64, w: usize, input: Input) {
        self.seq += 1;
        self.queue.insert((key(t), self.seq), (w, input));
    }

    /// A part of `stage` is wholly at `w` at `t`; the panels whole are
    /// added in order.
    fn arrive(&mut self, m: &ExchangeMachine, w: usize, stage: usize, t: f64) {
        let d = &mut self.due[w][stage];
        d.0 -= 1;
        d.1 = d.1.max(t);
        let s = self.plan.steps.len();
        while let Some(&(0, whole)) = self.due[w].get(self.adds[w].0) {
            let stage = self.adds[w].0;
            let band = stage / s;
            let piece = m.piece(w, band).expect("a piece");
            let r = self.rects[w].expect("a rectangle");
            let cols = m.pieces[piece].2.width;
            let flops = 2.0 * (r.height * cols * self.plan.steps[stage % s].len()) as f64;
            let end = whole.max(self.adds[w].1) + flops * self.truth[w].flop;
            self.adds[w] = (stage + 1, end);
            self.at(whole, w, Input::Received(ChunkId(piece as u64)));
            self.at(end, w, Input::Ready(ChunkId(piece as u64), 0.0));
        }
    }

    fn carry_out(&mut self, m: &ExchangeMachine, cmds: Vec<Command>, now: f64) {
        for c in cmds {
            match c {
                Command::Share {
                    send,
                    worker,
                    stage,
                    part,
                    ks,
                    forward,
                } => {
                    self.sends.push(send);
                    let values = (part.len() * ks.len()) as f64;
                    let start = now.max(self.down_free[worker]);
                    let end = start + values * self.port.per_value(self.truth[worker].send);
                    self.down_free[worker] = end;
                    self.at(end, worker, Input::Sent(send));
                    self.arrive(m, worker, stage, end);
                    for i in forward {
                        let to = m.enrolled[i];
                        let s = end.max(self.up_free[worker]).max(self.down_free[to]);
                        let e = s + values * self.truth[worker].ret.max(self.truth[to].send);
                        (self.up_free[worker], self.down_free[to]) = (e, e);
                        self.arrive(m, to, stage, e);
                    }
                }
                Command::Grant { worker, piece } => {
                    let rect = m.expected(worker, piece).expect("a granted return has a rectangle");
                    let start = now.max(self.up_free[worker]);
                    let end = start + self.port.per_value(self.truth[worker].ret) * rect.area() as f64;
                    self.up_free[worker] = end;
                    self.at(end, worker, Input::Results(piece));
                }
                Command::Store { rect, .. } => self.stored.push(rect),
                Command::Setup { .. } | Command::Release { .. } => {}
            }
        }
    }

    fn run(&mut self, m: &mut ExchangeMachine, kill: Option<(usize, f64)>) -> f64 {
        let cmds = m.start(0.0);
        self.carry_out(m, cmds, 0.0);
        if let Some((w, t)) = kill {
            self.at(t, w, Input::Lost("killed".into()));
        }
        let mut now = 0.0;
        while let Some(((t, _), (w, input))) = self.queue.pop_first() {
            now = t as f64 / 1e12;
            let cmds = m.on_event(w, input, now);
            self.carry_out(m, cmds, now);
            if *m.status() != Status::Running {
                break;
            }
        }
        now
    }
}

/// A switched star whose uplink is what limits, three ports.
fn star() -> (Vec<ProductWorker>, Vec<ProductRequest>) {
    let ws: Vec<ProductWorker> = [(6.7e-8, 3e-11), (1.3e-7, 4e-11), (6.7e-8, 6e-11), (2.7e-7, 2e-11)]
        .iter()
        .map(|&(link, flop)| ProductWorker {
            send: link,
            ret: link,
            flop,
            memory: None,
        })
        .collect();
    let reqs = [(true, 6.7e-8), (true, 0.0), (false, 0.0)]
        .iter()
        .map(|&(duplex, uplink)| {
            let mut req = ProductRequest::new(1536, 1024, 1280);
            req.duplex = duplex;
            req.uplink = uplink;
            req.panel_values = 1 << 17;
            req.exchange = true;
            req
        })
        .collect();
    (ws, reqs)
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
    let (ws, reqs) = star();
    for req in reqs {
        let plan = plan_product(&ws, &req).expect("plans");
        let x = plan.exchange.as_ref().expect("the exchange is taken");
        let mut m = ExchangeMachine::new(ws.len(), &plan).expect("an exchange");
        let mut sim = Sim::new(ws.clone(), &plan);
        let end = sim.run(&mut m, None);
        assert_eq!(*m.status(), Status::Done, "{req:?}");
        covered_once(&sim.stored, req.n, req.m);
        let mut sends = sim.sends.clone();
        sends.sort_unstable();
        let want: Vec<usize> = (0..x.transfers.len())
            .filter(|&i| x.transfers[i].from.is_none())
            .collect();
        assert_eq!(sends, want, "each master send once");
        let ratio = end / plan.makespan();
        assert!(
            (ratio - 1.0).abs() <= 1e-9,
            "{req:?}: run {end} against plan {} ({ratio})",
            plan.makespan()
        );
        let measured = m.finish();
        assert_eq!(measured.transfers.len(), want.len() + x.returns.len());
    }
}

#[test]
fn a_worker_lost_ends_the_exchange_named() {
    let (ws, reqs) = star();
    let plan = plan_product(&ws, &reqs[0]).expect("plans");
    let w = plan.enrolled[0];
    let mut m = ExchangeMachine::new(ws.len(), &plan).expect("an exchange");
    let mut sim = Sim::new(ws.clone(), &plan);
    sim.run(&mut m, Some((w, 0.3 * plan.makespan())));
    match m.status() {
        Status::Failed(why) => assert!(why.contains(&format!("worker {w}")) && why.contains("killed"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(m.finish().losses.len(), 1);
}
