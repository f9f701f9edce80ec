//! The layout of the text tables `pir bench` prints: one definition of each table's columns
//! serves its header and its rows, so the two cannot drift apart.

/// One column of a text table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Its title in the header.
    pub title: &'static str,
    /// Its width in characters (a longer cell is not cut).
    pub width: usize,
    /// Left-aligned (names) or right-aligned (numbers).
    pub left: bool,
}

/// A left-aligned column (names).
pub const fn text(title: &'static str, width: usize) -> Column {
    Column {
        title,
        width,
        left: true,
    }
}

/// A right-aligned column (numbers).
pub const fn number(title: &'static str, width: usize) -> Column {
    Column {
        title,
        width,
        left: false,
    }
}

/// The titles of the columns every timing table starts with: what ran, then its median time
/// and speed next to the plain read of the same run, and their ratio.
const TIMING: [&str; 8] = [
    "shape",
    "scheme",
    "mode",
    "thr",
    "median ms",
    "GB/s",
    "read GB/s",
    "ratio",
];

/// The columns of a timing table, the [`TIMING`] ones first (with these widths; the first three
/// left-aligned), then `more`.
pub fn timing_columns(widths: [usize; 8], more: &[Column]) -> Vec<Column> {
    TIMING
        .iter()
        .zip(widths)
        .enumerate()
        .map(|(i, (&title, width))| {
            if i < 3 {
                text(title, width)
            } else {
                number(title, width)
            }
        })
        .chain(more.iter().copied())
        .collect()
}

/// The cells of the [`TIMING`] columns: names as they are, times and speeds with two decimals,
/// the ratio with `ratio_digits`.
pub fn timing_cells(
    names: [&str; 3],
    threads: usize,
    [median_ms, gb_per_s, read_gb_per_s]: [f64; 3],
    (ratio, ratio_digits): (f64, usize),
) -> Vec<String> {
    let mut cells: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    cells.push(threads.to_string());
    cells.extend([median_ms, gb_per_s, read_gb_per_s].map(|v| format!("{v:.2}")));
    cells.push(format!("{ratio:.ratio_digits$}"));
    cells
}

/// The header line: every column's title in its place.
pub fn header(columns: &[Column]) -> String {
    let titles: Vec<String> = columns.iter().map(|c| c.title.to_string()).collect();
    line(columns, &titles)
}

/// A row: each cell padded to its column, one space between columns.
pub fn line(columns: &[Column], cells: &[String]) -> String {
    columns
        .iter()
        .zip(cells)
        .map(|(column, cell)| {
            let width = column.width;
            if column.left {
                format!("{cell:<width$}")
            } else {
                format!("{cell:>width$}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_rows_share_the_columns() {
        let columns = [text("name", 6), number("ms", 5)];
        assert_eq!(header(&columns), "name      ms");
        assert_eq!(
            line(&columns, &["ab".into(), format!("{:.2}", 1.5)]),
            "ab      1.50"
        );
        // A cell wider than its column is kept whole.
        assert_eq!(
            line(&columns, &["abcdefgh".into(), "1".into()]),
            "abcdefgh     1"
        );
    }
}
