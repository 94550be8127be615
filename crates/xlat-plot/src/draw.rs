//! Drawing a [`Chart`] on a plotters backend.

use crate::ticks::{log_ticks, range, Labels};
use crate::{Chart, SIZE};
use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Series with more points than this are drawn as lines only (histograms).
const MAX_DOTS: usize = 64;

/// The y range of a log axis: the positive values with a margin, and a bottom edge below
/// them when zeros are drawn there. `None` when no value is positive.
fn log_range(ys: impl Iterator<Item = f64> + Clone, zeros: bool) -> Option<(f64, f64)> {
    let pos = ys.filter(|&y| y > 0.0);
    let lo = pos.clone().fold(f64::INFINITY, f64::min);
    let hi = pos.fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return None;
    }
    // At least a decade and a half: a flat series still gets labelled ticks.
    let top = hi * 1.5;
    Some((
        (if zeros { lo / 10.0 } else { lo / 1.5 }).min(top / 30.0),
        top,
    ))
}

pub(crate) fn draw_on<DB: DrawingBackend>(
    chart: &Chart,
    root: DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let xs = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(chart.marks.iter().map(|m| m.x));
    let ys = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1));
    let (x0, x1) = if chart.x_log2 {
        let lo = xs.clone().fold(f64::INFINITY, f64::min);
        let hi = xs.fold(f64::NEG_INFINITY, f64::max);
        (lo / 1.2, hi * 1.2)
    } else {
        range(xs)
    };
    let zeros = ys.clone().filter(|&y| y == 0.0).count();
    let mut notes = chart.notes.clone();
    let y_log = chart
        .y_log
        .then(|| log_range(ys.clone(), zeros > 0))
        .flatten();
    let (y0, y1) = y_log.unwrap_or_else(|| range(ys));
    match (chart.y_log, y_log) {
        (true, Some(_)) if zeros > 0 => notes.push(format!(
            "{zeros} value{} of 0 drawn as hollow dots on the bottom edge, labelled 0 (a log axis has no 0)",
            if zeros == 1 { "" } else { "s" }
        )),
        (true, None) => notes.push("every value is 0: drawn on a linear axis".into()),
        _ => {}
    }
    // The title and notes above the chart, centred.
    let mid = SIZE.0 as i32 / 2;
    let top = Pos::new(HPos::Center, VPos::Top);
    root.draw(&Text::new(
        chart.title.clone(),
        (mid, 10),
        ("sans-serif", 22).into_font().color(&BLACK).pos(top),
    ))
    .map_err(e)?;
    for (i, n) in notes.iter().enumerate() {
        let style = ("sans-serif", 14)
            .into_font()
            .color(&BLACK.mix(0.6))
            .pos(top);
        root.draw(&Text::new(n.clone(), (mid, 40 + 18 * i as i32), style))
            .map_err(e)?;
    }
    let area = root.margin(44 + 18 * notes.len() as u32, 0, 0, 0);
    let mut builder = ChartBuilder::on(&area);
    builder
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80);
    let colors = |i: usize| Palette99::pick(i).to_rgba();
    let xl = Labels::new(x0, x1, chart.x_log2);
    let yl = Labels::new(y0, y1, y_log.is_some());
    // A log axis with zeros: its bottom edge is a tick labelled 0, no other tick near it.
    let edge_zero = y_log.is_some() && zeros > 0;
    let y_ticks: Vec<f64> = if edge_zero {
        std::iter::once(y0).chain(log_ticks(y0 * 1.5, y1)).collect()
    } else if y_log.is_some() {
        log_ticks(y0, y1)
    } else {
        Vec::new()
    };
    let y_text = |y: f64| {
        if edge_zero && y <= y0 * (1.0 + 1e-9) {
            "0".to_string()
        } else {
            yl.label(y)
        }
    };
    // On a log y axis a 0 is drawn on the bottom edge.
    let at = |(x, y): (f64, f64)| {
        if y_log.is_some() && y <= 0.0 {
            (x, y0)
        } else {
            (x, y)
        }
    };
    macro_rules! body {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            ctx.configure_mesh()
                .x_label_formatter(&|x: &f64| xl.label(*x))
                .y_label_formatter(&|y: &f64| y_text(*y))
                .x_desc(&chart.x_label)
                .y_desc(&chart.y_label)
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(e)?;
            for (i, s) in chart.series.iter().enumerate() {
                let c = colors(i);
                ctx.draw_series(LineSeries::new(
                    s.points.iter().map(|&p| at(p)),
                    c.stroke_width(2),
                ))
                .map_err(e)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
                if !chart.steps && s.points.len() <= MAX_DOTS {
                    ctx.draw_series(s.points.iter().map(|&p| {
                        let style = if at(p) == p {
                            c.filled()
                        } else {
                            c.stroke_width(2)
                        };
                        Circle::new(at(p), 3, style)
                    }))
                    .map_err(e)?;
                }
            }
            for (i, m) in chart.marks.iter().enumerate() {
                let grey = BLACK.mix(0.45);
                ctx.draw_series(std::iter::once(PathElement::new(
                    vec![(m.x, y0), (m.x, y1)],
                    grey.stroke_width(1),
                )))
                .map_err(e)?;
                // Labels alternate in height so that close marks stay readable, and
                // sit left of their line in the chart's right half.
                let frac = 0.04 + 0.05 * (i % 3) as f64;
                let y = match y_log {
                    Some(_) => y1 * (y0 / y1).powf(frac),
                    None => y1 - (y1 - y0) * frac,
                };
                let right = if chart.x_log2 {
                    (m.x / x0).ln() > (x1 / x0).ln() * 0.55
                } else {
                    m.x - x0 > (x1 - x0) * 0.55
                };
                let (text, h) = if right {
                    (format!("{} ", m.label), HPos::Right)
                } else {
                    (format!(" {}", m.label), HPos::Left)
                };
                let style = ("sans-serif", 13)
                    .into_font()
                    .color(&grey)
                    .pos(Pos::new(h, VPos::Top));
                ctx.draw_series(std::iter::once(Text::new(text, (m.x, y), style)))
                    .map_err(e)?;
            }
            if chart.series.len() > 1 || !chart.series[0].name.is_empty() {
                ctx.configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 14))
                    .draw()
                    .map_err(e)?;
            }
        }};
    }
    match (chart.x_log2, y_log.is_some()) {
        (true, true) => body!(builder
            .build_cartesian_2d(
                (x0..x1).log_scale().base(2.0),
                (y0..y1).log_scale().with_key_points(y_ticks.clone())
            )
            .map_err(e)?),
        (true, false) => body!(builder
            .build_cartesian_2d((x0..x1).log_scale().base(2.0), y0..y1)
            .map_err(e)?),
        (false, true) => body!(builder
            .build_cartesian_2d(
                x0..x1,
                (y0..y1).log_scale().with_key_points(y_ticks.clone())
            )
            .map_err(e)?),
        (false, false) => body!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(e)?),
    }
    root.present().map_err(e)?;
    Ok(())
}
