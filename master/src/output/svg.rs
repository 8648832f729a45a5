//! SVG helpers shared by every chart: text escaping and the grouped bar
//! chart of the experiments.

use std::fmt::Write as _;

/// Text made safe for SVG content and attribute values.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A grouped bar chart: one group per label, one bar per series; the value
/// axis starts at `y_min` (say so in the title when it is not 0).
pub fn bars(title: &str, y_label: &str, y_min: f64, groups: &[(String, Vec<(String, f64)>)]) -> String {
    bars_with(title, y_label, y_min, groups, None)
}

/// [`bars`] with a labelled horizontal reference line (a bound) at
/// `reference.0`.
pub fn bars_with(
    title: &str,
    y_label: &str,
    y_min: f64,
    groups: &[(String, Vec<(String, f64)>)],
    reference: Option<(f64, &str)>,
) -> String {
    let (w, h, left, bottom, top) = (900.0, 440.0, 70.0, 90.0, 40.0);
    let ymax = groups
        .iter()
        .flat_map(|g| g.1.iter().map(|b| b.1))
        .chain(reference.map(|r| r.0))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let series: Vec<String> = groups
        .first()
        .map(|g| g.1.iter().map(|b| b.0.clone()).collect())
        .unwrap_or_default();
    let colors = [
        "#4c72b0", "#a6bddb", "#dd8452", "#fdd0a2", "#55a868", "#b7e2b1", "#c44e52", "#f4a6a6",
    ];
    let gw = (w - left - 20.0) / groups.len().max(1) as f64;
    let bw = gw * 0.8 / series.len().max(1) as f64;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - ((v - y_min) / (ymax - y_min)).clamp(0.0, 1.0));
    let (title, y_label) = (escape(title), escape(y_label));
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="10" y="22" font-size="15" font-weight="bold">{title}</text><text x="12" y="{}" transform="rotate(-90 12 {})">{y_label}</text>"##,
        h / 2.0,
        h / 2.0
    );
    for k in 0..=5 {
        let v = y_min + (ymax - y_min) * k as f64 / 5.0;
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#ddd"/><text x="{2}" y="{3:.1}" text-anchor="end">{v:.2}</text>"##,
            y(v),
            w - 20.0,
            left - 5.0,
            y(v) + 4.0
        );
    }
    for (g, (label, vals)) in groups.iter().enumerate() {
        let gx = left + g as f64 * gw + gw * 0.1;
        for (b, (_, v)) in vals.iter().enumerate() {
            let v = if v.is_finite() { *v } else { 0.0 };
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{v:.4}</title></rect>"#,
                gx + b as f64 * bw,
                y(v),
                bw * 0.95,
                (h - bottom - y(v)).max(0.0),
                colors[b % colors.len()]
            );
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            gx + gw * 0.4,
            h - bottom + 16.0,
            escape(label)
        );
    }
    if let Some((v, label)) = reference {
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#c00" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{1}" y="{2:.1}" text-anchor="end" fill="#c00">{3}</text>"##,
            y(v),
            w - 20.0,
            y(v) - 4.0,
            escape(label)
        );
    }
    for (b, name) in series.iter().enumerate() {
        let (row, col) = (b / 4, b % 4);
        let lx = left + col as f64 * 190.0;
        let ly = h - 48.0 + row as f64 * 20.0;
        let _ = write!(
            s,
            r#"<rect x="{lx}" y="{ly}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            colors[b % colors.len()],
            lx + 16.0,
            ly + 10.0,
            escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_text_is_escaped() {
        assert_eq!(escape(r#"a<b & "c">"#), "a&lt;b &amp; &quot;c&quot;&gt;");
        let svg = bars("x < y", "s & t", 0.0, &[("<g>".into(), vec![("a&b".into(), 1.0)])]);
        for raw in ["x < y", "s & t", "<g>", "a&b"] {
            assert!(!svg.contains(raw), "{raw} left unescaped");
        }
        assert!(svg.contains("x &lt; y") && svg.contains("&lt;g&gt;") && svg.contains("a&amp;b"));
    }

    #[test]
    fn the_reference_line_sits_at_its_value() {
        // Bars of 2 and 4 (axis to 4.4, 10% above the tallest), line at 1;
        // the plot runs from y = 40 (top) to 440 − 90 = 350 (the axis).
        let g = [("g".to_string(), vec![("a".to_string(), 2.0), ("b".to_string(), 4.0)])];
        let svg = bars_with("t", "y", 0.0, &g, Some((1.0, "bound")));
        let want = 40.0 + 310.0 * (1.0 - 1.0 / 4.4);
        assert!(svg.contains(&format!(r#"y1="{want:.1}""#)), "{svg}");
        assert!(svg.contains(">bound</text>"));
        // A reference above every bar raises the axis to show it.
        let svg = bars_with("t", "y", 0.0, &g, Some((10.0, "high")));
        let want = 40.0 + 310.0 * (1.0 - 10.0 / 11.0);
        assert!(
            svg.contains(&format!(r##"y1="{want:.1}" x2="880" y2="{want:.1}" stroke="#c00""##)),
            "{svg}"
        );
    }
}
