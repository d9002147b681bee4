//! The memory/time trade-off curve as a standalone SVG: budget across (MiB),
//! total time up (ms), one line per swap mode; budgets that a mode cannot
//! meet are left out of its line. A dashed line marks the time without
//! swapping (the sum of op times).

use std::fmt::Write as _;

use super::policy::SweepPoint;
use super::Mode;

const W: f64 = 720.0;
const H: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const MIB: f64 = 1024.0 * 1024.0;

fn colour(mode: Mode) -> &'static str {
    match mode {
        Mode::SemiSync => "#d62728",
        Mode::Async => "#1f77b4",
        Mode::Pool => "#2ca02c",
        Mode::Oracle => "#7f7f7f",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Draws the curves of a sweep; `compute_ms` is the time without swapping.
pub fn render(title: &str, curves: &[(Mode, Vec<SweepPoint>)], compute_ms: f64) -> String {
    let fitting = |pts: &[SweepPoint]| -> Vec<(f64, f64)> {
        pts.iter()
            .filter(|p| p.plan.result.fits == Some(true))
            .map(|p| (p.budget as f64 / MIB, p.plan.result.total_ms))
            .collect()
    };
    let all: Vec<(f64, f64)> = curves.iter().flat_map(|(_, p)| fitting(p)).collect();
    let budgets = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.budget as f64 / MIB));
    let (mut x0, mut x1) = budgets.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    let y0 = 0.0;
    let mut y1 = all.iter().map(|p| p.1).fold(compute_ms, f64::max) * 1.08;
    if y1 <= 0.0 {
        y1 = 1.0;
    }
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        escape(title)
    );
    // Axes and ticks.
    let (ax, ay, bx, by) = (LEFT, H - BOTTOM, W - RIGHT, TOP);
    let _ = writeln!(
        s,
        r#"<path d="M{ax},{by} L{ax},{ay} L{bx},{ay}" stroke="black" fill="none"/>"#
    );
    for i in 0..=5 {
        let x = x0 + (x1 - x0) * i as f64 / 5.0;
        let y = y0 + (y1 - y0) * i as f64 / 5.0;
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{ay}" x2="{0:.1}" y2="{1}" stroke="black"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3:.0}</text>"#,
            px(x),
            ay + 5.0,
            ay + 19.0,
            x
        );
        let _ = writeln!(
            s,
            r#"<line x1="{0}" y1="{1:.1}" x2="{ax}" y2="{1:.1}" stroke="black"/><text x="{2}" y="{3:.1}" text-anchor="end">{4:.0}</text>"#,
            ax - 5.0,
            py(y),
            ax - 8.0,
            py(y) + 4.0,
            y
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">memory budget (MiB)</text>"#,
        (ax + bx) / 2.0,
        H - 18.0
    );
    let _ = writeln!(
        s,
        r#"<text x="20" y="{0}" text-anchor="middle" transform="rotate(-90 20 {0})">total time (ms)</text>"#,
        (ay + by) / 2.0
    );
    // No-swap time.
    let _ = writeln!(
        s,
        r#"<line x1="{ax}" y1="{0:.1}" x2="{bx}" y2="{0:.1}" stroke="gray" stroke-dasharray="5,4"/>"#,
        py(compute_ms)
    );
    let mut legend_y = TOP + 10.0;
    let _ = writeln!(
        s,
        r#"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="gray" stroke-dasharray="5,4"/><text x="{3}" y="{4}">no swapping</text>"#,
        bx + 12.0,
        legend_y,
        bx + 36.0,
        bx + 42.0,
        legend_y + 4.0
    );
    for (mode, pts) in curves {
        let pts = fitting(pts);
        let c = colour(*mode);
        legend_y += 20.0;
        let _ = writeln!(
            s,
            r#"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="{c}" stroke-width="2"/><text x="{3}" y="{4}">{mode}</text>"#,
            bx + 12.0,
            legend_y,
            bx + 36.0,
            bx + 42.0,
            legend_y + 4.0
        );
        if pts.is_empty() {
            continue;
        }
        let d: Vec<String> = pts
            .iter()
            .enumerate()
            .map(|(i, &(x, y))| {
                format!(
                    "{}{:.1},{:.1}",
                    if i == 0 { "M" } else { "L" },
                    px(x),
                    py(y)
                )
            })
            .collect();
        let _ = writeln!(
            s,
            r#"<path d="{}" stroke="{c}" stroke-width="2" fill="none"/>"#,
            d.join(" ")
        );
        for &(x, y) in &pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"><title>{mode}: {x:.1} MiB, {y:.1} ms</title></circle>"#,
                px(x),
                py(y)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}
