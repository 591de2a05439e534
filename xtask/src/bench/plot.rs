//! A small log-log line plot as SVG, enough for the benchmark's sweep: x
//! is a size in bytes, ticked at powers of two in human units (4 KiB ...
//! 1 GiB), y is ticked at powers of ten.

use std::fmt::Write as _;

/// One line on the chart: its legend label and its (x, y) points.
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 820.0;
const H: f64 = 460.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 290.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// Powers of ten spanning [lo, hi].
fn decades(lo: f64, hi: f64) -> (i32, i32) {
    (
        lo.log10().floor() as i32,
        hi.log10().ceil().max(lo.log10().floor() + 1.0) as i32,
    )
}

/// Powers of two spanning [lo, hi].
fn octaves(lo: f64, hi: f64) -> (i32, i32) {
    (
        lo.log2().floor() as i32,
        hi.log2().ceil().max(lo.log2().floor() + 1.0) as i32,
    )
}

/// A size in bytes in binary units: `4 KiB`, `64 MiB`, `1 GiB`, `1.5 MiB`.
pub fn size_label(bytes: f64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("GiB", (1u64 << 30) as f64),
        ("MiB", (1u64 << 20) as f64),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    let (unit, size) = UNITS
        .into_iter()
        .find(|(_, size)| bytes >= *size)
        .unwrap_or(("B", 1.0));
    let v = bytes / size;
    if v.fract() == 0.0 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// Every how many powers of two the x axis has a tick: at most 10 ticks.
fn tick_step(lo: i32, hi: i32) -> usize {
    ((hi - lo) as usize).div_ceil(10).max(1)
}

/// Where the plot area is and what it spans: powers of two on x, powers
/// of ten on y.
struct Frame {
    xo: (i32, i32),
    yd: (i32, i32),
    pw: f64,
    ph: f64,
}

impl Frame {
    fn new(curves: &[Curve]) -> Frame {
        let pts = curves
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| *x > 0.0 && *y > 0.0);
        let (mut xmin, mut xmax, mut ymin, mut ymax) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in pts {
            xmin = xmin.min(x);
            xmax = xmax.max(x);
            ymin = ymin.min(y);
            ymax = ymax.max(y);
        }
        if xmin > xmax {
            (xmin, xmax, ymin, ymax) = (1.0, 10.0, 1.0, 10.0);
        }
        Frame {
            xo: octaves(xmin, xmax),
            yd: decades(ymin, ymax),
            pw: W - LEFT - RIGHT,
            ph: H - TOP - BOTTOM,
        }
    }

    fn sx(&self, x: f64) -> f64 {
        let (o0, o1) = self.xo;
        LEFT + (x.log2() - o0 as f64) / (o1 - o0) as f64 * self.pw
    }

    fn sy(&self, y: f64) -> f64 {
        let (d0, d1) = self.yd;
        TOP + self.ph - (y.log10() - d0 as f64) / (d1 - d0) as f64 * self.ph
    }
}

pub fn svg(title: &str, x_label: &str, y_label: &str, curves: &[Curve]) -> String {
    let f = Frame::new(curves);
    let mut o = String::new();
    writeln!(o, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#).unwrap();
    writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#).unwrap();
    writeln!(
        o,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        LEFT + f.pw / 2.0,
        esc(title)
    )
    .unwrap();
    grid(&mut o, &f);
    axis_labels(&mut o, &f, x_label, y_label);
    for (i, s) in curves.iter().enumerate() {
        line(&mut o, &f, i, s);
    }
    o.push_str("</svg>\n");
    o
}

/// Grid lines and tick labels: sizes on x, decades on y.
fn grid(o: &mut String, f: &Frame) {
    for b in (f.xo.0..=f.xo.1).step_by(tick_step(f.xo.0, f.xo.1)) {
        let bytes = 2f64.powi(b);
        let x = f.sx(bytes);
        writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            TOP + f.ph
        )
        .unwrap();
        writeln!(
            o,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            TOP + f.ph + 16.0,
            size_label(bytes)
        )
        .unwrap();
    }
    for d in f.yd.0..=f.yd.1 {
        let y = f.sy(10f64.powi(d));
        writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
            LEFT + f.pw
        )
        .unwrap();
        writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">1e{d}</text>"#,
            LEFT - 6.0,
            y + 4.0
        )
        .unwrap();
    }
}

/// The plot area's border and the two axis titles.
fn axis_labels(o: &mut String, f: &Frame, x_label: &str, y_label: &str) {
    writeln!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
        f.pw, f.ph
    )
    .unwrap();
    writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + f.pw / 2.0,
        H - 12.0,
        esc(x_label)
    )
    .unwrap();
    writeln!(
        o,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + f.ph / 2.0,
        esc(y_label)
    )
    .unwrap();
}

/// Curve `i`: its polyline, its points, and its legend entry.
fn line(o: &mut String, f: &Frame, i: usize, s: &Curve) {
    let color = COLORS[i % COLORS.len()];
    let dash = if s.label.contains("alone") {
        r#" stroke-dasharray="2 3""#
    } else if s.label.contains("touch") {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    let path: Vec<String> = s
        .points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|&(x, y)| format!("{:.1},{:.1}", f.sx(x), f.sy(y)))
        .collect();
    writeln!(
        o,
        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
        path.join(" ")
    )
    .unwrap();
    for p in &path {
        let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
        writeln!(o, r#"<circle cx="{x}" cy="{y}" r="3" fill="{color}"/>"#).unwrap();
    }
    let ly = TOP + 10.0 + i as f64 * 18.0;
    let lx = LEFT + f.pw + 12.0;
    writeln!(
        o,
        r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/>"#,
        lx + 24.0
    )
    .unwrap();
    writeln!(
        o,
        r#"<text x="{}" y="{}">{}</text>"#,
        lx + 30.0,
        ly + 4.0,
        esc(&s.label)
    )
    .unwrap();
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_polyline_per_curve_on_log_axes() {
        let curves = vec![
            Curve {
                label: "eager no access".into(),
                points: vec![(4096.0, 5.0), (1073741824.0, 50000.0)],
            },
            Curve {
                label: "mainline <no> access".into(),
                points: vec![(4096.0, 1.0), (1073741824.0, 1.5)],
            },
        ];
        let s = svg("t", "x", "y", &curves);
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(
            s.contains(">4 KiB<") && s.contains(">1 GiB<"),
            "x ticks 4 KiB..1 GiB"
        );
        assert!(!s.contains(">1e10<"), "sizes in human units");
        assert!(s.contains("mainline &lt;no&gt; access"));
        // Log scale on both axes: 4 KiB (2^12) and 1 GiB (2^30) at the
        // plot's left and right edges; y spans the decades 1e0..1e5, so 5
        // sits log10(5)/5 of the way up and 50000 log10(50000)/5.
        let base = s.lines().find(|l| l.starts_with("<polyline")).unwrap();
        let ph = H - TOP - BOTTOM;
        let up = |v: f64| TOP + ph - v.log10() / 5.0 * ph;
        let want = format!(
            "points=\"{LEFT:.1},{:.1} {:.1},{:.1}\"",
            up(5.0),
            W - RIGHT,
            up(50000.0)
        );
        assert!(base.contains(&want), "{base} lacks {want}");
    }

    #[test]
    fn sizes_in_human_units() {
        assert_eq!(size_label(4096.0), "4 KiB");
        assert_eq!(size_label(65536.0), "64 KiB");
        assert_eq!(size_label((8u64 << 20) as f64), "8 MiB");
        assert_eq!(size_label((1u64 << 30) as f64), "1 GiB");
        assert_eq!(size_label(512.0), "512 B");
        assert_eq!(size_label(1.5 * (1u64 << 20) as f64), "1.5 MiB");
        // 4 KiB .. 1 GiB is 18 doublings: a tick every 2, 10 ticks.
        assert_eq!(tick_step(12, 30), 2);
        assert_eq!(tick_step(12, 16), 1);
    }

    #[test]
    fn empty_input_still_draws_axes() {
        let s = svg("t", "x", "y", &[]);
        assert!(s.contains("<rect"));
        assert_eq!(s.matches("<polyline").count(), 0);
    }
}
