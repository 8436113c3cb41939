//! The chart of docs/performance.md: cold start, client CPU and client
//! heap against the number of endpoints, as a hand-written SVG (three
//! panels, logarithmic axes, one point per measured size).

use std::fmt::Write;

/// One panel: a title, a unit, and (endpoints, value) points.
pub struct Panel<'a> {
    pub title: &'a str,
    pub unit: &'a str,
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 300.0;
const H: f64 = 240.0;
const PAD: f64 = 48.0;

fn log_scale(v: f64, lo: f64, hi: f64, out_lo: f64, out_hi: f64) -> f64 {
    let t = (v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln());
    out_lo + t * (out_hi - out_lo)
}

/// Decades spanning every value of `values`.
fn decades(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let lo = 10f64.powf(lo.max(1e-9).log10().floor());
    let hi = 10f64.powf(hi.max(lo * 10.0).log10().ceil());
    (lo, hi)
}

fn panel(svg: &mut String, x0: f64, p: &Panel<'_>) {
    let (xl, xh) = decades(p.points.iter().map(|(x, _)| *x));
    let (yl, yh) = decades(p.points.iter().map(|(_, y)| *y));
    let sx = |x: f64| log_scale(x, xl, xh, x0 + PAD, x0 + W - 10.0);
    let sy = |y: f64| log_scale(y, yl, yh, H - PAD, 30.0);
    let _ = writeln!(
        svg,
        r#"<text x="{:.0}" y="18" font-size="13" text-anchor="middle">{} ({})</text>"#,
        x0 + W / 2.0,
        p.title,
        p.unit
    );
    let _ = writeln!(
        svg,
        r##"<rect x="{:.0}" y="30" width="{:.0}" height="{:.0}" fill="none" stroke="#888"/>"##,
        x0 + PAD,
        W - PAD - 10.0,
        H - PAD - 30.0
    );
    let mut d = xl;
    while d <= xh * 1.001 {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.0}" font-size="10" text-anchor="middle">{}</text>"#,
            sx(d),
            H - PAD + 14.0,
            short(d)
        );
        d *= 10.0;
    }
    let mut d = yl;
    while d <= yh * 1.001 {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"#,
            x0 + PAD - 4.0,
            sy(d) + 3.0,
            short(d)
        );
        d *= 10.0;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.0}" y="{:.0}" font-size="11" text-anchor="middle">endpoints</text>"#,
        x0 + W / 2.0,
        H - 10.0
    );
    let line: Vec<String> = p
        .points
        .iter()
        .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
        .collect();
    let _ = writeln!(
        svg,
        r##"<polyline points="{}" fill="none" stroke="#1f77b4" stroke-width="2"/>"##,
        line.join(" ")
    );
    for (x, y) in &p.points {
        let _ = writeln!(
            svg,
            r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#1f77b4"/>"##,
            sx(*x),
            sy(*y)
        );
    }
}

fn short(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{}M", v / 1e6),
        v if v >= 1e3 => format!("{}k", v / 1e3),
        v if v >= 1.0 => format!("{v}"),
        v => format!("{v:.0e}"),
    }
}

/// The whole SVG: the panels side by side.
pub fn svg(panels: &[Panel<'_>]) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{:.0}" height="{H:.0}" font-family="sans-serif">"#,
        W * panels.len() as f64
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, p) in panels.iter().enumerate() {
        panel(&mut svg, W * i as f64, p);
    }
    svg.push_str("</svg>\n");
    svg
}
