//! A picture of an arena: op index across, offset up, one rectangle per
//! tensor, and a dashed line at the lower bound, so a person can see where
//! the memory goes and how far the plan is from the bound.

use std::fmt::Write;

use super::records::UsageRecord;
use super::OffsetsAssignment;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 600.0;
const MARGIN: f64 = 50.0;

/// Renders `plan` over `records` as a standalone SVG document; `title` goes
/// in the header line.
pub fn render_svg(
    records: &[UsageRecord],
    plan: &OffsetsAssignment,
    lower_bound: u64,
    title: &str,
) -> String {
    let ops = records.iter().map(|r| r.last + 1).max().unwrap_or(1).max(1) as f64;
    let top = plan.total_size.max(lower_bound).max(1) as f64;
    let (w, h) = (WIDTH - 2.0 * MARGIN, HEIGHT - 2.0 * MARGIN);
    let x = |op: f64| MARGIN + op / ops * w;
    let y = |bytes: f64| HEIGHT - MARGIN - bytes / top * h;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{MARGIN}" y="20">{}: {} bytes, lower bound {} bytes ({:.3}x)</text>"#,
        escape(title),
        plan.total_size,
        lower_bound,
        plan.total_size as f64 / lower_bound.max(1) as f64
    );
    for (i, r) in records.iter().enumerate() {
        let Some(&off) = plan.offsets.get(i) else {
            continue;
        };
        if r.size == 0 {
            continue;
        }
        // A stable pseudo-random hue per tensor id keeps neighbours distinct.
        let hue = (r.id.wrapping_mul(0x9E37_79B9) >> 7) % 360;
        let (x0, x1) = (x(r.first as f64), x((r.last + 1) as f64));
        let (y0, y1) = (y((off + r.size) as f64), y(off as f64));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.2}" y="{y0:.2}" width="{:.2}" height="{:.2}" fill="hsl({hue},65%,65%)" stroke="black" stroke-width="0.3"><title>tensor {} size {} ops {}..={} offset {}</title></rect>"#,
            (x1 - x0).max(0.5),
            (y1 - y0).max(0.5),
            r.id,
            r.size,
            r.first,
            r.last,
            off
        );
    }
    let lb = y(lower_bound as f64);
    let _ = writeln!(
        s,
        r#"<line x1="{MARGIN}" y1="{lb:.2}" x2="{:.2}" y2="{lb:.2}" stroke="red" stroke-dasharray="6 4" stroke-width="1.5"/>"#,
        WIDTH - MARGIN
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.2}" y="{:.2}" fill="red" text-anchor="end">lower bound</text>"#,
        WIDTH - MARGIN,
        lb - 4.0
    );
    let (bx, by) = (MARGIN, HEIGHT - MARGIN);
    let _ = writeln!(
        s,
        r#"<line x1="{bx}" y1="{by}" x2="{:.2}" y2="{by}" stroke="black"/>"#,
        WIDTH - MARGIN
    );
    let _ = writeln!(
        s,
        r#"<line x1="{bx}" y1="{by}" x2="{bx}" y2="{MARGIN}" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.2}" y="{:.2}" text-anchor="middle">op index (0..{})</text>"#,
        WIDTH / 2.0,
        HEIGHT - 15.0,
        ops as u64
    );
    let _ = writeln!(
        s,
        r#"<text x="15" y="{:.2}" transform="rotate(-90 15 {:.2})" text-anchor="middle">offset (bytes, 0..{})</text>"#,
        HEIGHT / 2.0,
        HEIGHT / 2.0,
        top as u64
    );
    s.push_str("</svg>\n");
    s
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
