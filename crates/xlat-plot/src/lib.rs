//! Line charts of xlat's results (miss-ratio curves, sweeps), written as SVG or PNG
//! files a user opens directly; no Python needed.
//!
//! Text is drawn with a TrueType font read at run time (`plotters`' `ab_glyph`
//! backend: no system font library): `$XLAT_FONT`, else DejaVu Sans from Debian's
//! `fonts-dejavu-core`. Without one, [`write`] fails saying which package to install.
//! A file is drawn in memory and written through `xlat_fs::OutFile`: complete, or not at
//! all, with no predictable temporary name.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    /// (x, y) points in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// A chart: lines over shared axes.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// A log2 x axis (sizes in powers of two); every x must then be > 0.
    pub x_log2: bool,
    pub series: Vec<Series>,
    /// Vertical lines at given x values, labelled (knees, medians).
    pub marks: Vec<Mark>,
    /// Histograms: the points are step corners, drawn without dots.
    pub steps: bool,
}

/// A labelled vertical line.
#[derive(Clone, Debug)]
pub struct Mark {
    pub x: f64,
    pub label: String,
}

/// Series with more points than this are drawn as lines only (histograms).
const MAX_DOTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{0}: a plot is written as .svg or .png")]
    Format(PathBuf),
    #[error("no font to draw text with: install Debian's fonts-dejavu-core, or set XLAT_FONT to a .ttf file ({0})")]
    Font(String),
    #[error("nothing to plot: {0}")]
    Empty(String),
    #[error("drawing {path}: {msg}")]
    Draw { path: PathBuf, msg: String },
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Fonts tried in order when `XLAT_FONT` is not set.
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers a TrueType font as plotters' `sans-serif` (once per process).
fn font() -> Result<(), PlotError> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let paths: Vec<String> = match std::env::var("XLAT_FONT") {
            Ok(p) => vec![p],
            Err(_) => FONTS.iter().map(|s| s.to_string()).collect(),
        };
        for p in &paths {
            if let Ok(bytes) = std::fs::read(p) {
                // plotters keeps the font for the process's life.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(format!("tried {}", paths.join(", ")))
    })
    .clone()
    .map_err(PlotError::Font)
}

/// Chart size in pixels (SVG user units).
const SIZE: (u32, u32) = (960, 600);

/// Largest magnitude drawn: axis ranges (with their margins) and tick positions stay
/// finite below it. A larger value is a bug upstream, refused with an error.
pub const MAX_VALUE: f64 = 1e300;

/// The chart has something to draw, every point drawable; the font is there.
fn check(chart: &Chart) -> Result<(), PlotError> {
    let points = chart.series.iter().flat_map(|s| &s.points);
    let finite = |v: f64| v.is_finite() && v.abs() <= MAX_VALUE;
    let ok = |&&(x, y): &&(f64, f64)| finite(x) && finite(y) && (!chart.x_log2 || x > 0.0);
    let marks_ok = chart
        .marks
        .iter()
        .all(|m| finite(m.x) && (!chart.x_log2 || m.x > 0.0));
    if chart.series.iter().all(|s| s.points.is_empty())
        || !points.clone().all(|p| ok(&p))
        || !marks_ok
    {
        return Err(PlotError::Empty(format!(
            "{}: no points, or a value that is not a finite number of magnitude at most \
             {MAX_VALUE:e} (or x ≤ 0 on a log axis)",
            chart.title
        )));
    }
    font()
}

/// `chart` as an SVG document in a string (to inline in an HTML report).
pub fn svg(chart: &Chart) -> Result<String, PlotError> {
    check(chart)?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw_on(chart, root).map_err(|msg| PlotError::Draw {
            path: PathBuf::from("(inline SVG)"),
            msg,
        })?;
    }
    Ok(out)
}

/// Writes `chart` to `path` (`.svg` or `.png`, by extension).
pub fn write(chart: &Chart, path: &Path) -> Result<(), PlotError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_lowercase);
    let svg = match ext.as_deref() {
        Some("svg") => true,
        Some("png") => false,
        _ => return Err(PlotError::Format(path.to_path_buf())),
    };
    check(chart)?;
    let draw = |e: String| PlotError::Draw {
        path: path.to_path_buf(),
        msg: e,
    };
    // Drawn in memory, then written through an `OutFile` (a private temporary name,
    // created O_EXCL beside the destination, renamed when complete, removed on any
    // error): nothing is written under a predictable name, and a failed write (a full
    // disk) leaves neither a stub nor a temporary file.
    let bytes = if svg {
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
            draw_on(chart, root).map_err(draw)?;
        }
        out.into_bytes()
    } else {
        let mut rgb = vec![0u8; SIZE.0 as usize * SIZE.1 as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
            draw_on(chart, root).map_err(draw)?;
        }
        png(&rgb).map_err(draw)?
    };
    let io = |source| PlotError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = xlat_fs::OutFile::create(path).map_err(io)?;
    std::io::Write::write_all(&mut f, &bytes).map_err(io)?;
    f.commit().map_err(io)
}

/// An RGB image of [`SIZE`] encoded as PNG.
fn png(rgb: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, SIZE.0, SIZE.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(|e| e.to_string())?;
    w.write_image_data(rgb).map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

/// The axis range of `v` with a margin (a single value gets a range around it).
fn range(v: impl Iterator<Item = f64> + Clone, log: bool) -> (f64, f64) {
    let lo = v.clone().fold(f64::INFINITY, f64::min);
    let hi = v.fold(f64::NEG_INFINITY, f64::max);
    if log {
        return (lo / 1.2, hi * 1.2);
    }
    let lo = lo.min(0.0);
    if hi <= lo {
        // A flat series: a range around it (relative, so that it is not lost to rounding).
        return (lo, lo + lo.abs().max(1.0));
    }
    (lo, hi + (hi - lo) * 0.05)
}

fn draw_on<DB: DrawingBackend>(
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
    let (x0, x1) = range(xs, chart.x_log2);
    let (y0, y1) = range(ys, false);
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&chart.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80);
    let colors = |i: usize| Palette99::pick(i).to_rgba();
    macro_rules! body {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            ctx.configure_mesh()
                .x_label_formatter(&|x: &f64| number(*x))
                .y_label_formatter(&|y: &f64| number(*y))
                .x_desc(&chart.x_label)
                .y_desc(&chart.y_label)
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(e)?;
            for (i, s) in chart.series.iter().enumerate() {
                let c = colors(i);
                ctx.draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                    .map_err(e)?
                    .label(s.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
                if !chart.steps && s.points.len() <= MAX_DOTS {
                    ctx.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
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
                let y = y1 - (y1 - y0) * (0.04 + 0.05 * (i % 3) as f64);
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
    if chart.x_log2 {
        body!(builder
            .build_cartesian_2d((x0..x1).log_scale().base(2.0), y0..y1)
            .map_err(e)?);
    } else {
        body!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(e)?);
    }
    root.present().map_err(e)?;
    Ok(())
}

/// An axis label: whole numbers without decimals, others with up to 3.
fn number(v: f64) -> String {
    if v == v.round() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> Chart {
        Chart {
            title: "misses of the L1 DTLB".into(),
            x_label: "entries".into(),
            y_label: "MPKI".into(),
            x_log2: true,
            series: vec![
                Series {
                    name: "gzip".into(),
                    points: vec![(1.0, 30.0), (2.0, 20.0), (64.0, 1.0), (4096.0, 0.01)],
                },
                Series {
                    name: "gups".into(),
                    points: vec![(1.0, 900.0), (64.0, 890.0), (4096.0, 700.0)],
                },
            ],
            marks: vec![Mark {
                x: 64.0,
                label: "L1 knee".into(),
            }],
            steps: false,
        }
    }

    #[test]
    fn writes_svg_and_png_with_every_series() {
        let tmp = xlat_fs::private_dir("xlat-plot-").unwrap();
        let dir = tmp.path();
        let svg = dir.join("c.svg");
        write(&chart(), &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg"), "{}", &text[..80.min(text.len())]);
        for s in [
            "misses of the L1 DTLB",
            "gzip",
            "gups",
            "entries",
            "MPKI",
            "L1 knee",
        ] {
            assert!(text.contains(s), "{s} missing from the SVG");
        }
        // Four points and three points: seven markers.
        assert_eq!(text.matches("<circle").count(), 7);
        let png = dir.join("c.png");
        write(&chart(), &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(bytes.len() > 10_000, "{} bytes", bytes.len());
        // No temporary files are left behind.
        let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
        assert_eq!(left.len(), 2);
    }

    /// Issue 35: a value of f64::MAX (a merged report's metric) never finished drawing;
    /// it is refused at once, and values up to [`MAX_VALUE`] (flat or not) are drawn.
    #[test]
    fn huge_values_are_refused_or_drawn_never_looped_on() {
        let dir = xlat_fs::private_dir("xlat-plot-").unwrap();
        let p = dir.path().join("h.svg");
        let mut c = chart();
        c.series[0].points.push((8.0, f64::MAX));
        assert!(matches!(write(&c, &p), Err(PlotError::Empty(_))));
        assert!(matches!(svg(&c), Err(PlotError::Empty(_))));
        c.series[0].points.pop();
        c.marks[0].x = f64::INFINITY;
        assert!(matches!(svg(&c), Err(PlotError::Empty(_))));
        for ys in [
            vec![0.0, MAX_VALUE],
            vec![MAX_VALUE, MAX_VALUE],
            vec![-MAX_VALUE, MAX_VALUE],
            vec![1e-300, 1e-300],
        ] {
            let mut c = chart();
            c.series[1].points = ys
                .iter()
                .enumerate()
                .map(|(i, &y)| (i as f64 + 1.0, y))
                .collect();
            write(&c, &p).unwrap_or_else(|e| panic!("{ys:?}: {e}"));
        }
        let mut c = chart();
        c.x_log2 = false;
        c.series[1].points = vec![(-MAX_VALUE, 1.0), (MAX_VALUE, 2.0)];
        c.marks.clear();
        write(&c, &p).unwrap();
    }

    /// Issue 35: the plot's temporary file had a predictable name next to the output and
    /// a planted link there was followed; a write that fails left it behind.
    #[test]
    fn no_temporary_file_is_left_or_followed() {
        let dir = xlat_fs::private_dir("xlat-plot-").unwrap();
        let out = dir.path().join("c.svg");
        // The old temporary name, planted as a link to a victim file.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let old_tmp = dir
            .path()
            .join(format!(".c.svg.{}.partial.svg", std::process::id()));
        std::os::unix::fs::symlink(&victim, &old_tmp).unwrap();
        write(&chart(), &out).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A write that fails (the destination's directory is gone) leaves nothing.
        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert!(write(&chart(), &gone.join("sub/x.png")).is_err());
        let mut after: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        after.sort();
        assert_eq!(names, after);
        assert_eq!(std::fs::read_dir(&gone).unwrap().count(), 0);
    }

    #[test]
    fn bad_requests_are_errors() {
        let tmp = xlat_fs::private_dir("xlat-plot-").unwrap();
        let p = tmp.path().join("x.jpg");
        assert!(matches!(write(&chart(), &p), Err(PlotError::Format(_))));
        let mut c = chart();
        c.series[0].points.push((0.0, 1.0));
        let p = tmp.path().join("x.svg");
        assert!(matches!(write(&c, &p), Err(PlotError::Empty(_))));
        c.series.clear();
        assert!(matches!(write(&c, &p), Err(PlotError::Empty(_))));
    }
}
