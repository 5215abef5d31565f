//! PNG plots, drawn in Rust with an embedded font (DejaVu Sans from the
//! `dejavu` crate), so nothing depends on system fonts or a browser.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use super::model::ExperimentReport;

const FONT: &str = "sans-serif";
const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("plot: {e}")
}

/// `1` -> "90", `2` -> "99", `3` -> "99.9" (percentile for n nines).
pub fn nines_label(n: f64) -> String {
    if n.abs() < 1e-9 {
        return "0".into();
    }
    let r = n.round();
    if (n - r).abs() > 1e-6 || r < 1.0 {
        return format!("{:.3}", 100.0 * (1.0 - 10f64.powf(-n)));
    }
    let k = r as usize;
    if k == 1 {
        "90".into()
    } else if k == 2 {
        "99".into()
    } else {
        format!("99.{}", "9".repeat(k - 2))
    }
}

fn us_label(v: f64) -> String {
    if v >= 1000.0 {
        let ms = v / 1000.0;
        if ms >= 10.0 {
            format!("{ms:.0} ms")
        } else {
            format!("{ms:.1} ms")
        }
    } else {
        format!("{v:.0} us")
    }
}

fn y_range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, 0.0f64);
    for v in vals.filter(|v| *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if hi <= 0.0 {
        return (1.0, 10.0);
    }
    ((lo / 1.5).max(1.0), hi * 1.5)
}

/// Draws the legend of the chart's series in its upper left corner, then
/// writes the image.
fn legend_and_save<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    root: &DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 16))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Latency by percentile, all modes on one chart, log-scaled percentile
/// axis (90, 99, 99.9, ...) and log latency.
pub fn percentile_chart(e: &ExperimentReport, path: &Path) -> Result<(), String> {
    register_font();
    let series: Vec<(String, Vec<[f64; 2]>)> = e
        .modes
        .iter()
        .filter_map(|m| Some((m.name.clone(), m.median_run()?.curve.clone())))
        .collect();
    let max_x = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p[0]))
        .fold(1.0f64, f64::max)
        .ceil();
    let (ylo, yhi) = y_range(series.iter().flat_map(|s| s.1.iter().map(|p| p[1])));
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: read latency by percentile (measured phase)", e.id),
            (FONT, 24),
        )
        .margin(15)
        .margin_right(45)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..max_x, (ylo..yhi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency")
        .x_labels(max_x as usize + 1)
        .x_label_formatter(&|x| nines_label(*x))
        .y_label_formatter(&|y| us_label(*y))
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 17))
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p[0], p[1].max(ylo))),
                c.stroke_width(3),
            ))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
    }
    legend_and_save(&mut chart, &root)
}

/// p99 of each second over time, all modes, with the background-work
/// interval shaded.
pub fn timeline_chart(e: &ExperimentReport, path: &Path) -> Result<(), String> {
    register_font();
    let runs: Vec<(String, &crate::result::RunResult)> = e
        .modes
        .iter()
        .filter_map(|m| Some((m.name.clone(), m.median_run()?)))
        .collect();
    let max_t = runs
        .iter()
        .flat_map(|r| r.1.timeline.iter().map(|p| p.t_s + 1.0))
        .fold(1.0f64, f64::max);
    let (ylo, yhi) = y_range(
        runs.iter()
            .flat_map(|r| r.1.timeline.iter().map(|p| p.p99_us)),
    );
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{}: p99 read latency per second", e.id), (FONT, 24))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..max_t, (ylo..yhi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds (shaded: background work running)")
        .y_desc("p99 latency")
        .y_label_formatter(&|y| us_label(*y))
        .x_labels((max_t.ceil() as usize + 1).min(13))
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 {
                format!("{x:.0}")
            } else {
                format!("{x:.1}")
            }
        })
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 17))
        .draw()
        .map_err(err)?;
    if let Some((_, r)) = runs.first() {
        let (a, b) = r.background_interval_s;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(a, ylo), (b.min(max_t), yhi)],
                RGBColor(255, 200, 120).mix(0.25).filled(),
            )))
            .map_err(err)?;
    }
    for (i, (name, run)) in runs.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = run
            .timeline
            .iter()
            .filter(|p| p.count > 0)
            .map(|p| (p.t_s + 0.5, p.p99_us.max(ylo)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        chart
            .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))
            .map_err(err)?;
    }
    legend_and_save(&mut chart, &root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(nines_label(0.0), "0");
        assert_eq!(nines_label(1.0), "90");
        assert_eq!(nines_label(2.0), "99");
        assert_eq!(nines_label(3.0), "99.9");
        assert_eq!(nines_label(4.0), "99.99");
        assert_eq!(us_label(1500.0), "1.5 ms");
        assert_eq!(us_label(16.0), "16 us");
    }
}
