//! PNG line charts of measurements: one chart, several labelled series of `(x, y)` points.
//!
//! The one plotting helper of the project (`pir release tune`'s goodput curve, the QDP flood
//! runs of `pir loadtest`). Text is drawn with DejaVu Sans read at run time from Debian's
//! `fonts-dejavu-core` (the plotting crate has no font of its own); a missing font is an error
//! that says which package to install, never a chart without labels.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

/// Where Debian's `fonts-dejavu-core` puts the font the charts use.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Chart size in pixels.
const WIDTH: u32 = 1000;
const HEIGHT: u32 = 600;

/// One labelled line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend text.
    pub label: String,
    /// Points in drawing order (usually increasing `x`).
    pub points: Vec<(f64, f64)>,
}

/// What a chart shows.
#[derive(Clone, Debug)]
pub struct Chart<'a> {
    /// The caption above the plot.
    pub title: &'a str,
    /// The x axis' label, with its unit.
    pub x_label: &'a str,
    /// The y axis' label, with its unit.
    pub y_label: &'a str,
    /// A logarithmic x axis (sizes over several orders of magnitude); every `x` must be > 0.
    pub log_x: bool,
    /// The lines.
    pub series: &'a [Series],
}

/// Why a chart was not written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The font is not installed.
    #[error("cannot read the chart font {path}: {source} (install Debian's fonts-dejavu-core)")]
    Font {
        /// The font path tried.
        path: PathBuf,
        /// The read error.
        source: std::io::Error,
    },
    /// Nothing to draw, or a value the axes cannot show.
    #[error("cannot chart this data: {0}")]
    Data(&'static str),
    /// The drawing back end failed (for instance, the file could not be written).
    #[error("drawing {path}: {message}")]
    Draw {
        /// The output path.
        path: PathBuf,
        /// The back end's message.
        message: String,
    },
}

/// Registers the font once per process; later calls see the first outcome.
fn register_font() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    let outcome = REGISTERED.get_or_init(|| {
        let bytes = std::fs::read(FONT_PATH).map_err(|e| e.to_string())?;
        // The crate keeps fonts for the whole process; the one font is leaked once, on purpose.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| "not a TrueType font".to_string())
    });
    outcome.clone().map_err(|message| PlotError::Font {
        path: PathBuf::from(FONT_PATH),
        source: std::io::Error::other(message),
    })
}

/// The smallest and largest of `values`, widened when they are equal so the axis has a span.
fn span(values: impl Iterator<Item = f64>) -> Result<(f64, f64), PlotError> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values {
        if !v.is_finite() {
            return Err(PlotError::Data("a value is not finite"));
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return Err(PlotError::Data("no points"));
    }
    if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return Ok((lo - pad, hi + pad));
    }
    Ok((lo, hi))
}

/// Writes `chart` as a PNG file at `path`.
pub fn line_chart_png(path: &Path, chart: &Chart<'_>) -> Result<(), PlotError> {
    register_font()?;
    let points = || chart.series.iter().flat_map(|s| s.points.iter());
    let (x_lo, x_hi) = span(points().map(|p| p.0))?;
    let (y_lo, y_hi) = span(points().map(|p| p.1))?;
    // Bars start at zero when the data is non-negative, so ratios read true.
    let y_lo = if y_lo >= 0.0 { 0.0 } else { y_lo };
    let y_hi = y_hi + (y_hi - y_lo) * 0.05;
    if chart.log_x && x_lo <= 0.0 {
        return Err(PlotError::Data(
            "a logarithmic x axis needs every x above zero",
        ));
    }
    let draw_err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(&e))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(chart.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72);
    if chart.log_x {
        let mut ctx = builder
            .build_cartesian_2d((x_lo..x_hi).log_scale(), y_lo..y_hi)
            .map_err(|e| draw_err(&e))?;
        draw_body(&mut ctx, chart).map_err(|e| draw_err(&e))?;
    } else {
        let mut ctx = builder
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(|e| draw_err(&e))?;
        draw_body(&mut ctx, chart).map_err(|e| draw_err(&e))?;
    }
    root.present().map_err(|e| draw_err(&e))
}

type DrawResult =
    Result<(), DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>>;

/// Axes, lines and legend, for either x axis kind.
fn draw_body<'a, X>(
    ctx: &mut ChartContext<
        'a,
        BitMapBackend<'a>,
        Cartesian2d<X, plotters::coord::types::RangedCoordf64>,
    >,
    chart: &Chart<'_>,
) -> DrawResult
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    ctx.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, series) in chart.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        ctx.draw_series(LineSeries::new(
            series.points.iter().copied(),
            color.stroke_width(2),
        ))?
        .label(series.label.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        ctx.draw_series(
            series
                .points
                .iter()
                .map(|&p| Circle::new(p, 3, color.filled())),
        )?;
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Whether the chart font is installed (in CI a missing font fails); also used by the
    /// `pir release tune` chart test.
    pub(crate) fn have_font() -> bool {
        if Path::new(FONT_PATH).exists() {
            return true;
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "{FONT_PATH} is missing: .ci/run installs fonts-dejavu-core"
        );
        eprintln!("skipped: install Debian's fonts-dejavu-core for the chart tests");
        false
    }

    fn png_size(bytes: &[u8]) -> (u32, u32) {
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
        assert_eq!(&bytes[12..16], b"IHDR");
        let word = |at: usize| {
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        (word(16), word(20))
    }

    #[test]
    fn writes_a_png_with_log_and_linear_axes() {
        if !have_font() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let series = [
            Series {
                label: "goodput".into(),
                points: vec![(1024.0, 5.0), (65536.0, 40.0), (8388608.0, 80.0)],
            },
            Series {
                label: "efficiency".into(),
                points: vec![(1024.0, 1.0), (65536.0, 0.9), (8388608.0, 0.5)],
            },
        ];
        for log_x in [true, false] {
            let path = dir.path().join(format!("chart-{log_x}.png"));
            let chart = Chart {
                title: "t",
                x_label: "block size (bytes)",
                y_label: "MB/s",
                log_x,
                series: &series,
            };
            line_chart_png(&path, &chart).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(png_size(&bytes), (WIDTH, HEIGHT));
            // A chart with lines and text is far from a blank image of the same size.
            assert!(
                bytes.len() > 4_000,
                "suspiciously small PNG: {} bytes",
                bytes.len()
            );
        }
    }

    #[test]
    fn refuses_data_it_cannot_draw() {
        if !have_font() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.png");
        let empty: [Series; 0] = [];
        let chart = Chart {
            title: "t",
            x_label: "x",
            y_label: "y",
            log_x: false,
            series: &empty,
        };
        assert!(matches!(
            line_chart_png(&path, &chart),
            Err(PlotError::Data(_))
        ));
        let zero = [Series {
            label: "s".into(),
            points: vec![(0.0, 1.0), (2.0, 3.0)],
        }];
        let chart = Chart {
            title: "t",
            x_label: "x",
            y_label: "y",
            log_x: true,
            series: &zero,
        };
        assert!(matches!(
            line_chart_png(&path, &chart),
            Err(PlotError::Data(_))
        ));
        let nan = [Series {
            label: "s".into(),
            points: vec![(1.0, f64::NAN)],
        }];
        let chart = Chart {
            title: "t",
            x_label: "x",
            y_label: "y",
            log_x: false,
            series: &nan,
        };
        assert!(matches!(
            line_chart_png(&path, &chart),
            Err(PlotError::Data(_))
        ));
        assert!(!path.exists());
    }
}
