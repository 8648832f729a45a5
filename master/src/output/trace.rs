//! Traces for Gantt analysis, in Chrome's trace-event format (opens in
//! Perfetto and chrome://tracing): complete events (`"ph": "X"`) with `ts`
//! and `dur` in microseconds. Process 1 holds what was measured, process 2
//! what the plan predicted (`"args": {"predicted": true}`); in each, thread
//! 0 is the master's port and thread i+1 is worker i. Sends and returns
//! say the products they carried (`"load"`), measured and predicted. Every
//! event says whether it belongs to the plan or to the probes of a run's
//! own calibration (`"args": {"phase": "plan" | "probe"}`); probes are
//! measured only.

use anyhow::{Context, Result};
use dls_core::record::Measured;
use dls_lp::sequence::PortOp;
use dls_lp::Plan;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const MEASURED_PID: u32 = 1;
pub const PREDICTED_PID: u32 = 2;

/// Every span's `args.phase`: the plan's chunks, or a run's probes (the
/// calibration inside a run: measured work, with no prediction of its own
/// worth drawing, since it was sent at guessed costs).
pub const PLAN: &str = "plan";
pub const PROBE: &str = "probe";

/// One complete event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub name: String,
    /// `send`, `compute`, `return` or `idle`.
    pub cat: String,
    pub ph: String,
    /// Microseconds from the start of the run.
    pub ts: f64,
    pub dur: f64,
    pub pid: u32,
    pub tid: u32,
    pub args: Value,
}

/// A whole trace: the spans and the track names.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub spans: Vec<Span>,
    /// Instant events on the master's track: failures, re-plans and online
    /// corrections.
    pub marks: Vec<Value>,
    /// Track names, index = tid (0 = master port).
    pub tracks: Vec<String>,
    /// What ran ("200 products of 128×128, rounds"), kept in the file's
    /// `otherData` for charts drawn later.
    pub title: Option<String>,
}

pub(crate) fn span(pid: u32, tid: u32, cat: &str, worker: &str, start: f64, end: f64, extra: Value) -> Span {
    let mut args = json!({ "worker": worker });
    if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            a.insert(k.clone(), v.clone());
        }
    }
    // Whole microseconds, ends rounded as starts are: a transfer that
    // starts the instant the previous one ends never appears to overlap it.
    let (ts, end_us) = ((start * 1e6).round(), (end * 1e6).round());
    Span {
        name: if tid == 0 {
            format!("{cat} {worker}")
        } else {
            cat.to_string()
        },
        cat: cat.to_string(),
        ph: "X".into(),
        ts,
        dur: (end_us - ts).max(0.0),
        pid,
        tid,
        args,
    }
}

/// A run chunk by chunk: on each worker's track its sends, computations,
/// waits for the port and returns; predicted ones from the plan's
/// sequence, measured ones as they happened. One round or many, the same.
fn chunk_spans(names: &[String], plan: &Plan, measured: &Measured) -> Vec<Span> {
    let r = &plan.sequence;
    let mut out = Vec::new();
    let no = json!({ "predicted": false, "phase": PLAN });
    for t in &measured.transfers {
        let cat = if t.send { "send" } else { "return" };
        let x = json!({ "predicted": false, "load": t.units, "phase": PLAN });
        out.push(span(
            MEASURED_PID,
            t.worker as u32 + 1,
            cat,
            &names[t.worker],
            t.start,
            t.end,
            x.clone(),
        ));
        out.push(span(MEASURED_PID, 0, cat, &names[t.worker], t.start, t.end, x));
    }
    for c in &measured.computes {
        out.push(span(
            MEASURED_PID,
            c.worker as u32 + 1,
            "compute",
            &names[c.worker],
            c.start,
            c.end,
            no.clone(),
        ));
    }
    let mut busy = vec![0.0f64; plan.loads.len()];
    for op in &r.ops {
        let PortOp::Send(j) = *op else { continue };
        let (c, t) = (r.chunks[j], r.times[j]);
        let (w, tid) = (&names[c.worker], c.worker as u32 + 1);
        let x = json!({ "predicted": true, "load": c.units, "round": c.round, "phase": PLAN });
        let compute_start = t.send_end.max(busy[c.worker]);
        busy[c.worker] = t.compute_end;
        out.push(span(PREDICTED_PID, tid, "send", w, t.send_start, t.send_end, x.clone()));
        out.push(span(
            PREDICTED_PID,
            tid,
            "compute",
            w,
            compute_start,
            t.compute_end,
            x.clone(),
        ));
        if t.return_start > t.compute_end {
            out.push(span(
                PREDICTED_PID,
                tid,
                "idle",
                w,
                t.compute_end,
                t.return_start,
                x.clone(),
            ));
        }
        out.push(span(
            PREDICTED_PID,
            tid,
            "return",
            w,
            t.return_start,
            t.return_end,
            x.clone(),
        ));
        out.push(span(PREDICTED_PID, 0, "send", w, t.send_start, t.send_end, x.clone()));
        out.push(span(PREDICTED_PID, 0, "return", w, t.return_start, t.return_end, x));
    }
    out
}

impl Trace {
    /// Measured and predicted side by side.
    pub fn new(names: &[String], plan: &Plan, measured: &Measured) -> Trace {
        let mut spans = Vec::new();
        spans.extend(chunk_spans(names, plan, measured));
        let mut tracks = vec!["master port".to_string()];
        tracks.extend(names.iter().cloned());
        let mut marks = Vec::new();
        for f in &measured.failures {
            marks.push(
                json!({"name": format!("lost {}", names[f.worker]), "cat": "failure", "ph": "i", "s": "g",
                "ts": f.at * 1e6, "pid": MEASURED_PID, "tid": f.worker + 1,
                "args": {"worker": names[f.worker], "reason": f.reason, "products_lost": f.products_lost, "phase": PLAN}}),
            );
        }
        for r in &measured.replans {
            let who: Vec<&str> = r.workers.iter().map(|&w| names[w].as_str()).collect();
            marks.push(json!({"name": "re-plan", "cat": "replan", "ph": "i", "s": "p", "ts": r.at * 1e6,
                "pid": MEASURED_PID, "tid": 0, "args": {"products": r.products, "workers": who, "predicted": r.predicted, "phase": PLAN}}));
        }
        for a in &measured.adaptations {
            let factors: serde_json::Map<String, Value> = a
                .factors
                .iter()
                .enumerate()
                .map(|(w, f)| (names[w].clone(), json!({"send": f[0], "compute": f[1], "return": f[2]})))
                .collect();
            marks.push(
                json!({"name": format!("correction (round {})", a.round), "cat": "adapt", "ph": "i", "s": "p",
                "ts": a.at * 1e6, "pid": MEASURED_PID, "tid": 0,
                "args": {"round": a.round, "products": a.products, "measured_over_predicted": factors, "phase": PLAN}}),
            );
        }
        Trace {
            spans,
            marks,
            tracks,
            title: None,
        }
    }

    /// `earlier` (a run's probes) then this trace, which began `start`
    /// seconds after it: this trace's times move by `start`, `earlier`'s
    /// tracks are matched by name, and a mark says where the plan began.
    pub fn after(mut self, earlier: Trace, start: f64) -> Trace {
        let shift = start * 1e6;
        for s in self.spans.iter_mut() {
            s.ts += shift;
        }
        for m in self.marks.iter_mut() {
            if let Some(ts) = m.get("ts").and_then(Value::as_f64) {
                m["ts"] = json!(ts + shift);
            }
        }
        let mut tracks = std::mem::take(&mut self.tracks);
        let mut track = |tid: u64| -> u32 {
            let Some(name) = earlier.tracks.get(tid as usize) else {
                return tid as u32;
            };
            let at = tracks.iter().position(|t| t == name).unwrap_or_else(|| {
                tracks.push(name.clone());
                tracks.len() - 1
            });
            at as u32
        };
        let mut spans = Vec::with_capacity(earlier.spans.len() + self.spans.len());
        // The probes are measured work: their spans say so (`args.phase`
        // `probe`, names `probe send` ...); what was predicted for them,
        // at the costs guessed before anything was measured, is left out.
        for mut s in earlier.spans.into_iter().filter(|s| s.pid == MEASURED_PID) {
            s.tid = track(u64::from(s.tid));
            s.name = format!("probe {}", s.name);
            if let Some(a) = s.args.as_object_mut() {
                a.insert("phase".into(), json!(PROBE));
            }
            spans.push(s);
        }
        let mut marks: Vec<Value> = (earlier.marks.into_iter())
            .filter(|m| m.get("pid").and_then(Value::as_u64) != Some(u64::from(PREDICTED_PID)))
            .collect();
        for m in marks.iter_mut() {
            if let Some(tid) = m.get("tid").and_then(Value::as_u64) {
                m["tid"] = json!(track(tid));
            }
            if let Some(a) = m.get_mut("args").and_then(Value::as_object_mut) {
                a.insert("phase".into(), json!(PROBE));
            }
        }
        self.tracks = tracks;
        spans.append(&mut self.spans);
        self.spans = spans;
        marks.push(
            json!({"name": "plan (after the probes)", "cat": "replan", "ph": "i", "s": "p",
            "ts": shift, "pid": MEASURED_PID, "tid": 0, "args": {"phase": PLAN}}),
        );
        marks.append(&mut self.marks);
        self.marks = marks;
        self
    }

    pub fn to_json(&self) -> Value {
        let mut events: Vec<Value> = Vec::new();
        for (pid, label) in [(MEASURED_PID, "measured"), (PREDICTED_PID, "predicted")] {
            events.push(json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}}));
            events.push(json!({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}));
            for (tid, name) in self.tracks.iter().enumerate() {
                events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
                events.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}));
            }
        }
        events.extend(
            self.spans
                .iter()
                .map(|s| serde_json::to_value(s).unwrap_or(Value::Null)),
        );
        let mut v = json!({ "traceEvents": events, "displayTimeUnit": "ms" });
        if let (Some(t), Some(o)) = (&self.title, v.as_object_mut()) {
            o.insert("otherData".into(), json!({ "title": t }));
        }
        v
    }

    pub fn write(&self, path: &std::path::Path) -> Result<()> {
        let text = serde_json::to_string(&self.to_json())?;
        crate::output::atomic_write(path, |f| std::io::Write::write_all(f, text.as_bytes()))
            .with_context(|| format!("writing trace {}", path.display()))
    }

    /// Read a trace this module wrote (or any with the same conventions).
    pub fn read(path: &std::path::Path) -> Result<Trace> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).with_context(|| format!("reading trace {origin}"))?;
        let v: Value = serde_json::from_str(&text).with_context(|| format!("{origin}: not JSON"))?;
        let events = v
            .get("traceEvents")
            .and_then(Value::as_array)
            .with_context(|| format!("{origin}: no traceEvents array: not a Chrome trace"))?;
        let mut tracks: Vec<String> = Vec::new();
        let mut spans = Vec::new();
        let mut marks = Vec::new();
        for e in events {
            match e.get("ph").and_then(Value::as_str) {
                Some("M") if e.get("name").and_then(Value::as_str) == Some("thread_name") => {
                    let tid = e.get("tid").and_then(Value::as_u64).unwrap_or(0) as usize;
                    let name = e
                        .pointer("/args/name")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string();
                    if tracks.len() <= tid {
                        tracks.resize(tid + 1, String::new());
                    }
                    tracks[tid] = name;
                }
                Some("X") => {
                    let s: Span =
                        serde_json::from_value(e.clone()).with_context(|| format!("{origin}: malformed event {e}"))?;
                    spans.push(s);
                }
                Some("i") => marks.push(e.clone()),
                _ => {}
            }
        }
        if spans.is_empty() {
            anyhow::bail!("{origin}: the trace holds no complete (\"X\") events");
        }
        let max_tid = spans.iter().map(|s| s.tid as usize).max().unwrap_or(0);
        if tracks.len() <= max_tid {
            tracks.resize(max_tid + 1, String::new());
        }
        for (i, t) in tracks.iter_mut().enumerate() {
            if t.is_empty() {
                *t = if i == 0 {
                    "master port".into()
                } else {
                    format!("track {i}")
                };
            }
        }
        let title = v.pointer("/otherData/title").and_then(Value::as_str).map(String::from);
        Ok(Trace {
            spans,
            marks,
            tracks,
            title,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(tracks: &[&str], spans: &[(u32, f64)]) -> Trace {
        Trace {
            spans: spans
                .iter()
                .map(|&(tid, at)| span(MEASURED_PID, tid, "send", tracks[tid as usize], at, at + 1.0, json!({})))
                .collect(),
            marks: vec![json!({"name": "lost", "ph": "i", "ts": 2e6, "tid": 2})],
            tracks: tracks.iter().map(|t| t.to_string()).collect(),
            title: None,
        }
    }

    /// The probes' spans keep their times and land on their worker's track
    /// by name (a worker lost while probed gets a track of its own); the
    /// plan's spans and marks move by the start.
    #[test]
    fn the_plan_follows_the_probes_track_by_track() {
        let probes = trace(&["master port", "x", "y", "z"], &[(1, 0.0), (2, 1.0), (3, 2.0)]);
        let plan = trace(&["master port", "z", "x"], &[(1, 0.5), (2, 1.5)]);
        let both = plan.after(probes, 10.0);
        assert_eq!(both.tracks, ["master port", "z", "x", "y"]);
        let at = |s: &Span| (both.tracks[s.tid as usize].as_str(), s.ts / 1e6);
        let got: Vec<(&str, f64)> = both.spans.iter().map(at).collect();
        assert_eq!(got, [("x", 0.0), ("y", 1.0), ("z", 2.0), ("z", 10.5), ("x", 11.5)]);
        // Marks: the probes' (tid 2 was y there, is y here), the plan's
        // start, the plan's own (moved).
        let marks: Vec<(f64, u64)> = (both.marks.iter())
            .map(|m| (m["ts"].as_f64().unwrap_or(-1.0), m["tid"].as_u64().unwrap_or(99)))
            .collect();
        assert_eq!(marks, [(2e6, 3), (10e6, 0), (12e6, 2)]);
    }
}
