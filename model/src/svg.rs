//! Minimal SVG line plots: axes with ticks (linear or log₁₀), one polyline per series, a legend.
//! No dependencies; the output is a self-contained string.

use std::fmt::Write as _;

/// One named line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line plot.
#[derive(Debug, Clone, PartialEq)]
pub struct LinePlot {
    /// Title above the plot.
    pub title: String,
    /// X-axis label.
    pub x_label: String,
    /// Y-axis label.
    pub y_label: String,
    /// Log-scale x axis.
    pub log_x: bool,
    /// Log-scale y axis.
    pub log_y: bool,
    /// Category names for x = 0, 1, 2, … instead of numeric ticks.
    pub x_categories: Vec<String>,
    /// The lines.
    pub series: Vec<Series>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 11] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#000000",
];

struct Axis {
    log: bool,
    min: f64,
    max: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool) -> Self {
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            let v = if log { v.log10() } else { v };
            min = min.min(v);
            max = max.max(v);
        }
        if !min.is_finite() {
            (min, max) = (0.0, 1.0);
        }
        if log {
            min = min.floor();
            max = max.ceil().max(min + 1.0);
        } else {
            if min > 0.0 && min < 0.5 * max {
                min = 0.0;
            }
            if (max - min).abs() < 1e-12 {
                max = min + 1.0;
            }
            let pad = 0.05 * (max - min);
            max += pad;
            if min != 0.0 {
                min -= pad;
            }
        }
        Self { log, min, max }
    }

    fn fraction(&self, v: f64) -> Option<f64> {
        if self.log && v <= 0.0 {
            return None;
        }
        let v = if self.log { v.log10() } else { v };
        Some((v - self.min) / (self.max - self.min))
    }

    fn ticks(&self) -> Vec<(f64, String)> {
        if self.log {
            let (lo, hi) = (self.min as i32, self.max as i32);
            return (lo..=hi)
                .map(|e| (10f64.powi(e), format_tick(10f64.powi(e))))
                .collect();
        }
        let raw = (self.max - self.min) / 5.0;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * magnitude)
            .find(|s| *s >= raw)
            .unwrap_or(raw);
        let mut ticks = Vec::new();
        let mut t = (self.min / step).ceil() * step;
        while t <= self.max + 1e-9 * step {
            ticks.push((t, format_tick(t)));
            t += step;
        }
        ticks
    }
}

fn format_tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.0}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 10.0 || (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl LinePlot {
    /// Renders the plot as an SVG document.
    #[must_use]
    pub fn render(&self) -> String {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1));
        let x_axis = Axis::new(xs, self.log_x);
        let y_axis = Axis::new(ys, self.log_y);
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let px = |f: f64| LEFT + f * plot_w;
        let py = |f: f64| TOP + (1.0 - f) * plot_h;
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + plot_w / 2.0,
            escape(&self.title)
        );
        let _ = writeln!(
            svg,
            r#"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
        );
        // X ticks.
        let x_ticks: Vec<(f64, String)> = if self.x_categories.is_empty() {
            x_axis.ticks()
        } else {
            self.x_categories
                .iter()
                .enumerate()
                .map(|(i, name)| (i as f64, name.clone()))
                .collect()
        };
        for (value, label) in x_ticks {
            let Some(f) = x_axis.fraction(value) else {
                continue;
            };
            if !(-1e-9..=1.0 + 1e-9).contains(&f) {
                continue;
            }
            let x = px(f);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#e0e0e0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 16.0,
                escape(&label)
            );
        }
        for (value, label) in y_axis.ticks() {
            let Some(f) = y_axis.fraction(value) else {
                continue;
            };
            if !(-1e-9..=1.0 + 1e-9).contains(&f) {
                continue;
            }
            let y = py(f);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + plot_w,
                LEFT - 6.0,
                y + 4.0,
                escape(&label)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            HEIGHT - 18.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            svg,
            r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
            TOP + plot_h / 2.0,
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        for (index, series) in self.series.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            let points: Vec<String> = series
                .points
                .iter()
                .filter_map(|&(x, y)| {
                    Some(format!(
                        "{:.1},{:.1}",
                        px(x_axis.fraction(x)?),
                        py(y_axis.fraction(y)?)
                    ))
                })
                .collect();
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                points.join(" ")
            );
            for point in &points {
                let (x, y) = point.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(svg, r#"<circle cx="{x}" cy="{y}" r="3" fill="{color}"/>"#);
            }
            let ly = TOP + 10.0 + 18.0 * index as f64;
            let lx = LEFT + plot_w + 12.0;
            let _ = writeln!(
                svg,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
                lx + 20.0,
                lx + 26.0,
                ly + 4.0,
                escape(&series.name)
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}
