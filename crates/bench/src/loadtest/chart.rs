//! A run's timeline as a PNG line chart (`pir loadtest --plot`), drawn by [`crate::plot`]: per
//! interval, the lookups served, their p99 latency, and for breach servers the QDP queue depth
//! and the fallback full scans, on one time axis.

use std::path::Path;

use crate::plot::{line_chart_png, Chart, PlotError, Series};

use super::{IntervalRow, Report};

/// The series of `rows`: only those with at least one point.
pub fn series(rows: &[IntervalRow]) -> Vec<Series> {
    let line = |label: &str, value: &dyn Fn(&IntervalRow) -> Option<f64>| Series {
        label: label.to_string(),
        points: (rows.iter())
            .filter_map(|r| value(r).filter(|v| v.is_finite()).map(|v| (r.t_s, v)))
            .collect(),
    };
    let all = [
        line("lookups served in the interval", &|r| Some(r.ok as f64)),
        line("p99 latency of the interval, ms", &|r| Some(r.p99_ms)),
        line("QDP queue depth, both servers", &|r| {
            r.qdp_queue_depth.map(|d| d as f64)
        }),
        line("QDP fallback full scans in the interval", &|r| {
            r.qdp_fallback_scans.map(|s| s as f64)
        }),
    ];
    all.into_iter().filter(|s| !s.points.is_empty()).collect()
}

/// Draws `report`'s timeline to `path`, captioned `title`.
pub fn plot(report: &Report, title: &str, path: &Path) -> Result<(), PlotError> {
    let series = series(&report.intervals);
    line_chart_png(
        path,
        &Chart {
            title,
            x_label: "seconds since the start of the run",
            y_label: "lookups, ms, queue entries, scans",
            log_x: false,
            series: &series,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_series_with_points_are_drawn() {
        let row = |t_s: f64, depth: Option<u64>| IntervalRow {
            t_s,
            sent: 3,
            ok: 2,
            errors: 1,
            p50_ms: 1.0,
            p99_ms: if depth.is_some() { 4.0 } else { f64::NAN },
            qdp_queue_depth: depth,
            qdp_fallback_scans: depth.map(|_| 1),
            server_cpu_s: None,
        };
        let mirror = series(&[row(0.5, None), row(1.0, None)]);
        assert_eq!(mirror.len(), 1, "{mirror:?}");
        assert_eq!(mirror[0].points, [(0.5, 2.0), (1.0, 2.0)]);
        let breach = series(&[row(0.5, Some(7)), row(1.0, Some(3))]);
        assert_eq!(breach.len(), 4);
        assert_eq!(breach[2].points, [(0.5, 7.0), (1.0, 3.0)]);
        assert_eq!(breach[1].points, [(0.5, 4.0), (1.0, 4.0)]);
    }
}
