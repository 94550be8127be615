//! Line charts of xlat's results (miss-ratio curves, sweeps, time series), written as SVG
//! or PNG files a user opens directly; no Python needed.
//!
//! Text is drawn with DejaVu Sans, bundled (`font.rs`; `$XLAT_FONT` names another), so a
//! machine without fonts renders them too. A file is drawn in memory and written through
//! `xlat_fs::OutFile`: complete, or not at all, with no predictable temporary name.

mod draw;
mod font;
mod ticks;

use plotters::prelude::*;
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
    /// A log10 y axis (miss ratios). Values of 0 are drawn on its bottom edge as hollow
    /// dots, and a note under the title says how many; negative values are refused.
    pub y_log: bool,
    pub series: Vec<Series>,
    /// Vertical lines at given x values, labelled (knees, medians, the configured size).
    pub marks: Vec<Mark>,
    /// Histograms: the points are step corners, drawn without dots.
    pub steps: bool,
    /// Lines of small text under the title (what is held constant, what is clipped).
    pub notes: Vec<String>,
}

/// A labelled vertical line.
#[derive(Clone, Debug)]
pub struct Mark {
    pub x: f64,
    pub label: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{0}: a plot is written as .svg or .png")]
    Format(PathBuf),
    #[error("no font to draw text with: {0} (unset XLAT_FONT to use the bundled DejaVu Sans)")]
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

/// Chart size in pixels (SVG user units).
const SIZE: (u32, u32) = (960, 600);

/// Largest magnitude drawn: axis ranges (with their margins) and tick positions stay
/// finite below it. A larger value is a bug upstream, refused with an error.
pub const MAX_VALUE: f64 = 1e300;

/// Whether `path` names a format [`write`] draws (`.svg`, `.png`): `Some(true)` for SVG.
pub fn format_of(path: &Path) -> Result<bool, PlotError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_lowercase);
    match ext.as_deref() {
        Some("svg") => Ok(true),
        Some("png") => Ok(false),
        _ => Err(PlotError::Format(path.to_path_buf())),
    }
}

/// The chart has something to draw, every point drawable; the font is there.
fn check(chart: &Chart) -> Result<(), PlotError> {
    let points = chart.series.iter().flat_map(|s| &s.points);
    let finite = |v: f64| v.is_finite() && v.abs() <= MAX_VALUE;
    let ok = |&&(x, y): &&(f64, f64)| {
        finite(x) && finite(y) && (!chart.x_log2 || x > 0.0) && (!chart.y_log || y >= 0.0)
    };
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
             {MAX_VALUE:e} (or x ≤ 0 on a log x axis, y < 0 on a log y axis)",
            chart.title
        )));
    }
    font::register()
}

/// `chart` as an SVG document in a string (to inline in an HTML report).
pub fn svg(chart: &Chart) -> Result<String, PlotError> {
    check(chart)?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw::draw_on(chart, root).map_err(|msg| PlotError::Draw {
            path: PathBuf::from("(inline SVG)"),
            msg,
        })?;
    }
    Ok(out)
}

/// Writes `chart` to `path` (`.svg` or `.png`, by extension).
pub fn write(chart: &Chart, path: &Path) -> Result<(), PlotError> {
    let svg = format_of(path)?;
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
            draw::draw_on(chart, root).map_err(draw)?;
        }
        out.into_bytes()
    } else {
        png(&render(chart).map_err(draw)?).map_err(draw)?
    };
    let io = |source| PlotError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = xlat_fs::OutFile::create(path).map_err(io)?;
    std::io::Write::write_all(&mut f, &bytes).map_err(io)?;
    f.commit().map_err(io)
}

/// `chart` as RGB pixels of [`SIZE`].
fn render(chart: &Chart) -> Result<Vec<u8>, String> {
    let mut rgb = vec![0u8; SIZE.0 as usize * SIZE.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
        draw::draw_on(chart, root)?;
    }
    Ok(rgb)
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
            ..Default::default()
        }
    }

    /// The texts of an SVG document's `<text>` elements.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').and_then(|(_, r)| r.split_once("</text>")))
            .map(|(t, _)| t.trim().to_string())
            .collect()
    }

    /// The bundled font draws text without any font installed or named.
    #[test]
    fn text_is_drawn_with_the_bundled_font() {
        let b = font::bytes(None).unwrap();
        assert!(std::ptr::eq(b, font::BUNDLED));
        assert_eq!(&b[..4], &[0, 1, 0, 0], "a TrueType file");
        let msg = font::bytes(Some("/nonexistent/x.ttf".into())).unwrap_err();
        assert!(msg.contains("XLAT_FONT=/nonexistent/x.ttf"), "{msg}");
        // The title's band has dark pixels (text), and none without a title.
        check(&chart()).unwrap();
        let dark = |c: &Chart| {
            let rgb = render(c).unwrap();
            (0..36 * SIZE.0 as usize)
                .filter(|&p| rgb[p * 3] < 100)
                .count()
        };
        let titled = dark(&chart());
        assert!(titled > 200, "{titled} dark pixels in the title");
        let mut untitled = chart();
        untitled.title.clear();
        assert_eq!(dark(&untitled), 0);
    }

    /// A log y axis: zeros on the bottom edge as hollow dots, with a note; negative
    /// values refused.
    #[test]
    fn log_y_draws_zeros_on_the_edge_and_says_so() {
        let mut c = chart();
        c.y_log = true;
        c.series[0].points.push((8192.0, 0.0));
        c.series[1].points.push((8192.0, 0.0));
        let s = svg(&c).unwrap();
        assert!(
            texts(&s)
                .iter()
                .any(|t| t.starts_with("2 values of 0 drawn as hollow dots")),
            "{:?}",
            texts(&s)
        );
        // The bottom edge reads 0, and no other tick does.
        assert_eq!(texts(&s).iter().filter(|t| *t == "0").count(), 1);
        // Seven filled dots and two hollow ones.
        assert_eq!(s.matches("<circle").count(), 9);
        assert_eq!(
            s.split("<circle")
                .skip(1)
                .filter(|c| c.split("/>").next().unwrap().contains("fill=\"none\""))
                .count(),
            2
        );
        c.series[0].points.push((16384.0, -1.0));
        assert!(matches!(svg(&c), Err(PlotError::Empty(_))));
        // Only zeros: a linear axis, said.
        let mut c = chart();
        c.y_log = true;
        for s in &mut c.series {
            for p in &mut s.points {
                p.1 = 0.0;
            }
        }
        let s = svg(&c).unwrap();
        assert!(texts(&s).contains(&"every value is 0: drawn on a linear axis".to_string()));
    }

    /// A flat series of small values: no two tick labels alike.
    #[test]
    fn flat_series_get_distinct_tick_labels() {
        for y in [1e-4, 0.64, 3e9, 1e-300] {
            let mut c = chart();
            c.marks.clear();
            c.series.truncate(1);
            c.series[0].name.clear();
            for p in &mut c.series[0].points {
                p.1 = y;
            }
            let t = texts(&svg(&c).unwrap());
            let mut u = t.clone();
            u.sort();
            u.dedup();
            assert_eq!(u.len(), t.len(), "{y}: {t:?}");
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
