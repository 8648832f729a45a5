//! SVG Gantt charts of a trace, like the report's Figure 9: one row for the
//! master's port and one per worker; measured above, predicted below, on
//! one time axis. Sends are white, computing dark grey, returns pale grey,
//! idle time hatched.

use crate::output::svg::escape;
use crate::output::trace::{Trace, MEASURED_PID, PREDICTED_PID};
use std::fmt::Write as _;

const ROW: f64 = 22.0;
const LABEL: f64 = 130.0;
const WIDTH: f64 = 1000.0;
const GAP: f64 = 36.0;

fn style(cat: &str) -> &'static str {
    match cat {
        "send" => "fill:#ffffff;stroke:#000",
        "compute" => "fill:#444444;stroke:#000",
        "return" => "fill:#bbbbbb;stroke:#000",
        _ => "fill:url(#idle);stroke:#999",
    }
}

/// A time step of 1, 2 or 5 × 10^k giving about 10 ticks.
fn tick_step(span: f64) -> f64 {
    let raw = (span / 10.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

pub fn svg(trace: &Trace, title: &str) -> String {
    let end_us = trace.spans.iter().map(|s| s.ts + s.dur).fold(0.0, f64::max).max(1.0);
    let end = end_us / 1e6;
    let rows = trace.tracks.len() as f64;
    let section = rows * ROW + GAP;
    let height = 40.0 + 2.0 * section + 50.0;
    let x = |t_us: f64| LABEL + (t_us / end_us) * (WIDTH - LABEL - 20.0);
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">
<defs><pattern id="idle" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff8d0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#d0a000" stroke-width="2"/></pattern></defs>
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="15" font-weight="bold">{}</text>
"##,
        escape(title)
    );
    for (k, (pid, label)) in [(MEASURED_PID, "measured"), (PREDICTED_PID, "predicted")]
        .iter()
        .enumerate()
    {
        let top = 40.0 + k as f64 * section;
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}" font-weight="bold">{}</text>"#,
            top + 4.0,
            escape(&section_title(trace, *pid, label))
        );
        if let (MEASURED_PID, Some((from, to))) = (*pid, probes_span(trace)) {
            // The calibration inside the run: a band behind its probes.
            let _ = writeln!(
                out,
                r##"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="#e4efff"/><text x="{:.2}" y="{:.2}" font-size="10" fill="#0050d0">calibration (probes)</text>"##,
                x(from),
                top + 8.0,
                (x(to) - x(from)).max(0.5),
                rows * ROW + 4.0,
                x(from) + 2.0,
                top + 10.0 + rows * ROW + 12.0
            );
        }
        for (i, name) in trace.tracks.iter().enumerate() {
            let y = top + 10.0 + i as f64 * ROW;
            let label = row_label(trace, i, name);
            let _ = writeln!(out, r#"<text x="10" y="{}">{}</text>"#, y + ROW * 0.7, escape(&label));
            let _ = writeln!(
                out,
                r##"<line x1="{LABEL}" y1="{}" x2="{}" y2="{}" stroke="#eee"/>"##,
                y + ROW - 1.0,
                WIDTH - 20.0,
                y + ROW - 1.0
            );
        }
        for s in trace.spans.iter().filter(|s| s.pid == *pid) {
            let y = top + 10.0 + s.tid as f64 * ROW + 2.0;
            let w = (x(s.ts + s.dur) - x(s.ts)).max(0.5);
            let who = s.args.get("worker").and_then(|v| v.as_str()).unwrap_or("");
            let probe = is_probe(s);
            let _ = writeln!(
                out,
                r#"<rect x="{:.2}" y="{y:.2}" width="{w:.2}" height="{}" style="{}{}"><title>{}{} {}: {:.6} s – {:.6} s</title></rect>"#,
                x(s.ts),
                ROW - 6.0,
                style(&s.cat),
                if probe { PROBE_STYLE } else { "" },
                if probe { "probe " } else { "" },
                escape(&s.cat),
                escape(who),
                s.ts / 1e6,
                (s.ts + s.dur) / 1e6
            );
            bar_text(&mut out, s, x(s.ts), y, w);
        }
        // Marks last, so no bar hides them or their words. A mark's words
        // are written only where they clear the last words on its row (a
        // run's corrections come close together); the line and its
        // tooltip always are.
        let mut marks: Vec<&serde_json::Value> = (trace.marks.iter())
            .filter(|m| m.get("pid").and_then(|v| v.as_u64()) == Some(*pid as u64))
            .collect();
        marks.sort_by(|a, b| mark_at(a).total_cmp(&mark_at(b)));
        let mut words_end = vec![f64::NEG_INFINITY; trace.tracks.len().max(1)];
        for m in marks {
            let ts = mark_at(m);
            let tid = m.get("tid").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
            let name = m.get("name").and_then(|v| v.as_str()).unwrap_or("");
            let cat = m.get("cat").and_then(|v| v.as_str()).unwrap_or("");
            let y = top + 10.0 + tid as f64 * ROW;
            let _ = write!(
                out,
                r##"<line x1="{px:.2}" y1="{y:.2}" x2="{px:.2}" y2="{:.2}" {}><title>{}</title></line>"##,
                y + ROW,
                mark_style(cat),
                escape(name),
                px = x(ts)
            );
            let end = words_end.get_mut(tid.min(trace.tracks.len().saturating_sub(1)));
            match end {
                Some(end) if x(ts) + 2.0 >= *end => {
                    *end = x(ts) + 2.0 + MARK_CHAR * name.chars().count() as f64 + 4.0;
                    let _ = write!(
                        out,
                        r##"<text x="{:.2}" y="{:.2}" font-size="9" fill="{}">{}</text>"##,
                        x(ts) + 2.0,
                        y + 8.0,
                        mark_colour(cat),
                        escape(name)
                    );
                }
                _ => {}
            }
            out.push('\n');
        }
    }
    axis_and_legend(&mut out, 40.0 + 2.0 * section, end, &x, &trace.marks);
    out.push_str("</svg>\n");
    out
}

/// How a probe's bar differs from the plan's: dashed, paler.
const PROBE_STYLE: &str = ";stroke-dasharray:2,1;opacity:0.6";

/// Width of one character of a mark's words (9 px sans-serif), to tell
/// whether two marks' words would overlap.
const MARK_CHAR: f64 = 5.0;

fn mark_at(m: &serde_json::Value) -> f64 {
    m.get("ts").and_then(|v| v.as_f64()).unwrap_or(0.0)
}

fn is_probe(s: &crate::output::trace::Span) -> bool {
    s.args.get("phase").and_then(|v| v.as_str()) == Some(crate::output::trace::PROBE)
}

/// From the first probe's start to the last probe's end, in microseconds
/// (none: the run had a platform).
fn probes_span(trace: &Trace) -> Option<(f64, f64)> {
    let probes = trace.spans.iter().filter(|s| is_probe(s));
    let from = probes.clone().map(|s| s.ts).reduce(f64::min)?;
    Some((from, probes.map(|s| s.ts + s.dur).fold(from, f64::max)))
}

/// "measured (makespan 0.25 s)"; after probes, how long they took and how
/// long the plan; the predicted section's makespan is the plan's, from its
/// first predicted send.
fn section_title(trace: &Trace, pid: u32, label: &str) -> String {
    let plan = (trace.spans.iter()).filter(|s| s.pid == pid && !is_probe(s));
    let start = plan.clone().map(|s| s.ts).reduce(f64::min).unwrap_or(0.0);
    let end = plan.map(|s| s.ts + s.dur).fold(start, f64::max);
    match (pid, probes_span(trace)) {
        (MEASURED_PID, Some((_, probes_end))) => {
            let all = end.max(probes_end);
            format!(
                "{label} (probes to {:.4} s; the plan from {:.4} s: makespan {:.4} s)",
                probes_end / 1e6,
                start / 1e6,
                (all - start) / 1e6
            )
        }
        _ => format!("{label} (makespan {:.4} s)", (end - start) / 1e6),
    }
}

/// A row's label: the worker, and whether it was lost or never enrolled
/// (no span in either section).
fn row_label(trace: &Trace, tid: usize, name: &str) -> String {
    if tid == 0 {
        return name.to_string();
    }
    let lost = trace.marks.iter().any(|m| {
        m.get("cat").and_then(|v| v.as_str()) == Some("failure")
            && m.get("tid").and_then(|v| v.as_u64()) == Some(tid as u64)
    });
    if lost {
        format!("{name} (lost)")
    } else if !trace.spans.iter().any(|s| s.tid as usize == tid) {
        format!("{name} (not enrolled)")
    } else {
        name.to_string()
    }
}

/// The words on a bar wide enough for them: whom a port segment serves,
/// how many products a computing bar holds. Kept as text, so they survive
/// conversion to an image (tooltips do not).
fn bar_text(out: &mut String, s: &crate::output::trace::Span, px: f64, y: f64, w: f64) {
    let who = s.args.get("worker").and_then(|v| v.as_str()).unwrap_or("");
    let text = match (s.tid, s.cat.as_str()) {
        (0, _) => who.to_string(),
        (_, "compute") => s
            .args
            .get("load")
            .and_then(|v| v.as_u64())
            .map_or(String::new(), |l| l.to_string()),
        _ => String::new(),
    };
    if text.is_empty() || w < 6.5 * text.chars().count() as f64 + 4.0 {
        return;
    }
    let fill = if s.cat == "compute" { "#fff" } else { "#000" };
    let _ = writeln!(
        out,
        r#"<text x="{:.2}" y="{:.2}" font-size="10" fill="{fill}">{}</text>"#,
        px + 2.0,
        y + ROW - 10.0,
        escape(&text)
    );
}

fn mark_colour(cat: &str) -> &'static str {
    match cat {
        "failure" => "#d00000",
        "replan" => "#0050d0",
        _ => "#008030",
    }
}

fn mark_style(cat: &str) -> String {
    let dash = if cat == "failure" {
        ""
    } else {
        r#" stroke-dasharray="4,2""#
    };
    format!(r#"stroke="{}" stroke-width="2"{dash}"#, mark_colour(cat))
}

/// The time axis under both sections, and the legend (marks only when the
/// trace has them).
fn axis_and_legend(out: &mut String, axis_y: f64, end: f64, x: &impl Fn(f64) -> f64, marks: &[serde_json::Value]) {
    // Time axis.
    let _ = writeln!(
        *out,
        r##"<line x1="{LABEL}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="#000"/>"##,
        WIDTH - 20.0
    );
    let step = tick_step(end);
    let mut t = 0.0;
    while t <= end * 1.0001 {
        let px = x(t * 1e6);
        let _ = writeln!(
            *out,
            r##"<line x1="{px:.2}" y1="{axis_y}" x2="{px:.2}" y2="{}" stroke="#000"/><text x="{px:.2}" y="{}" text-anchor="middle">{}</text>"##,
            axis_y + 5.0,
            axis_y + 18.0,
            format_tick(t, step)
        );
        t += step;
    }
    let _ = writeln!(
        *out,
        r#"<text x="{}" y="{}" text-anchor="end">seconds</text>"#,
        WIDTH - 20.0,
        axis_y + 34.0
    );
    // Legend.
    let ly = axis_y + 30.0;
    for (i, (cat, label)) in [
        ("send", "send"),
        ("compute", "compute"),
        ("return", "return"),
        ("idle", "idle"),
    ]
    .iter()
    .enumerate()
    {
        let lx = LABEL + i as f64 * 110.0;
        let _ = writeln!(
            *out,
            r#"<rect x="{lx}" y="{}" width="14" height="12" style="{}"/><text x="{}" y="{}">{label}</text>"#,
            ly - 10.0,
            style(cat),
            lx + 18.0,
            ly
        );
    }
    let mut lx = LABEL + 4.0 * 110.0;
    for (cat, label) in [
        ("failure", "worker lost"),
        ("replan", "recovery round planned"),
        ("adapt", "online correction"),
    ] {
        if !marks.iter().any(|m| m.get("cat").and_then(|v| v.as_str()) == Some(cat)) {
            continue;
        }
        let _ = writeln!(
            *out,
            r#"<line x1="{lx}" y1="{}" x2="{lx}" y2="{}" {}/><text x="{}" y="{}">{label}</text>"#,
            ly - 11.0,
            ly + 2.0,
            mark_style(cat),
            lx + 6.0,
            ly
        );
        lx += 8.0 * label.len() as f64 + 20.0;
    }
}

fn format_tick(t: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{t:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::trace::Span;

    #[test]
    fn rows_say_lost_or_not_enrolled_and_marks_have_a_legend() {
        let span = |tid, cat: &str, load: u64| Span {
            name: cat.into(),
            cat: cat.into(),
            ph: "X".into(),
            ts: 0.0,
            dur: 1e6,
            pid: MEASURED_PID,
            tid,
            args: serde_json::json!({"worker": "alpha", "load": load}),
        };
        let trace = Trace {
            spans: vec![span(0, "send", 0), span(1, "compute", 17)],
            marks: vec![
                serde_json::json!({"name": "lost alpha", "cat": "failure", "ph": "i", "ts": 5e5, "pid": MEASURED_PID, "tid": 1}),
            ],
            tracks: vec!["master port".into(), "alpha".into(), "beta".into()],
            title: None,
        };
        let svg = svg(&trace, "t");
        assert!(
            svg.contains(">alpha (lost)<") && svg.contains(">beta (not enrolled)<"),
            "{svg}"
        );
        // The load and whom the port serves are text on the bars, not only tooltips.
        assert!(svg.contains(">17</text>") && svg.contains(">alpha</text>"), "{svg}");
        assert!(
            svg.contains(">worker lost</text>") && !svg.contains("recovery round planned"),
            "{svg}"
        );
    }

    #[test]
    fn draws_every_span_once() {
        let s = |pid, tid, cat: &str, ts, dur| Span {
            name: cat.into(),
            cat: cat.into(),
            ph: "X".into(),
            ts,
            dur,
            pid,
            tid,
            args: serde_json::json!({"worker": "w<1>"}),
        };
        let trace = Trace {
            spans: vec![
                s(1, 1, "send", 0.0, 100.0),
                s(1, 1, "compute", 100.0, 900.0),
                s(1, 1, "return", 1000.0, 100.0),
                s(2, 1, "send", 0.0, 90.0),
            ],
            marks: Vec::new(),
            tracks: vec!["master port".into(), "w<1>".into()],
            title: None,
        };
        let svg = svg(&trace, "t & t");
        assert_eq!(svg.matches("<rect x=").count(), 4 + 4, "4 spans + 4 legend boxes");
        assert!(svg.contains("w&lt;1&gt;") && svg.contains("t &amp; t"));
        assert!(svg.contains("makespan 0.0011 s") && svg.contains("makespan 0.0001 s"));
        assert_eq!(tick_step(1.0), 0.1);
        assert_eq!(tick_step(7.0), 1.0);
        assert_eq!(tick_step(0.013), 0.002);
    }

    /// A run that calibrated first: the probes are drawn as measured work in
    /// a calibration band, never as predictions at the guessed costs; the
    /// predicted makespan is the plan's (recomputed here from its spans);
    /// marks close together do not print their words over each other.
    #[test]
    fn probes_are_measured_work_and_the_prediction_is_the_plans() {
        use crate::output::trace::{span, PLAN, PROBE};
        use serde_json::json;
        let tracks = || vec!["master port".to_string(), "a".to_string()];
        // The probes: 0.2 s measured, predicted at guessed costs as 51 s.
        let probes = Trace {
            spans: vec![
                span(MEASURED_PID, 1, "send", "a", 0.0, 0.1, json!({})),
                span(MEASURED_PID, 1, "compute", "a", 0.1, 0.2, json!({})),
                span(PREDICTED_PID, 1, "send", "a", 0.0, 51.0, json!({})),
            ],
            marks: Vec::new(),
            tracks: tracks(),
            title: None,
        };
        // The plan, predicted 0.5 s from its start and run in 0.6 s, with
        // three corrections 1 ms apart.
        let plan = Trace {
            spans: vec![
                span(MEASURED_PID, 1, "send", "a", 0.0, 0.6, json!({"phase": PLAN})),
                span(PREDICTED_PID, 1, "send", "a", 0.0, 0.5, json!({"phase": PLAN})),
            ],
            marks: (0..3)
                .map(|i| {
                    json!({"name": format!("correction (round {i})"), "cat": "adapt", "ph": "i",
                    "ts": 2e5 + 1e3 * f64::from(i), "pid": MEASURED_PID, "tid": 0, "args": {}})
                })
                .collect(),
            tracks: tracks(),
            title: None,
        };
        let both = plan.after(probes, 0.3);
        let phases: Vec<&str> = (both.spans.iter())
            .map(|s| s.args.get("phase").and_then(|v| v.as_str()).unwrap_or("none"))
            .collect();
        assert_eq!(phases, [PROBE, PROBE, PLAN, PLAN], "the probes' prediction is left out");
        let svg = svg(&both, "t");
        assert!(svg.contains("predicted (makespan 0.5000 s)"), "{svg}");
        assert!(!svg.contains("51.0"), "{svg}");
        assert!(
            svg.contains("calibration (probes)") && svg.contains("probes to 0.2000 s"),
            "{svg}"
        );
        assert_eq!(svg.matches("stroke-dasharray:2,1").count(), 2, "two probe bars");
        // Three correction lines, one set of words.
        assert_eq!(svg.matches("<title>correction (round").count(), 3, "{svg}");
        assert_eq!(svg.matches("\">correction (round").count(), 1, "{svg}");
    }
}
