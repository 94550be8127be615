//! The text tables the commands print, laid out by comfy-table: no borders, a header row,
//! names left-aligned and numbers right-aligned, each column as wide as its widest cell
//! and two spaces apart, nothing wrapped or cut (a pipe gets the same text as a
//! terminal), no colours. Cells are escaped ([`xlat_trace::escape`]): names from input
//! files cannot put control characters on the terminal or break the columns.

use comfy_table::{CellAlignment, ContentArrangement, Table, TableStyle};
use xlat_trace::escape;

/// Columns apart.
const GAP: u16 = 2;

/// How a column's cells (and its header) are aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Names.
    Left,
    /// Numbers.
    Right,
}

/// A table being filled.
pub struct Grid {
    table: Table,
    aligns: Vec<Align>,
    indent: usize,
}

impl Grid {
    /// A table with `columns` (header, alignment); an empty header everywhere means no
    /// header row. Every line is indented by `indent` spaces.
    pub fn new(indent: usize, columns: &[(&str, Align)]) -> Grid {
        let mut table = Table::new();
        table
            .load_style(TableStyle::new())
            .set_content_arrangement(ContentArrangement::Disabled);
        if columns.iter().any(|(h, _)| !h.is_empty()) {
            // A line break in a header makes a second header line.
            table.set_header(
                columns
                    .iter()
                    .map(|(h, _)| h.split('\n').map(escape).collect::<Vec<_>>().join("\n")),
            );
        }
        Grid {
            table,
            aligns: columns.iter().map(|c| c.1).collect(),
            indent,
        }
    }

    /// Adds a row: a cell per column (missing ones are empty), escaped.
    pub fn row<S: AsRef<str>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Grid {
        let cells: Vec<String> = cells
            .into_iter()
            .map(|c| escape(c.as_ref()).into_owned())
            .collect();
        self.table.add_row(cells);
        self
    }

    /// The table's lines, each ending in a line break, without trailing spaces.
    pub fn render(mut self) -> String {
        let n = self.aligns.len().max(self.table.column_count());
        for (i, c) in self.table.column_iter_mut().enumerate() {
            c.set_padding((0, if i + 1 < n { GAP } else { 0 }));
            c.set_cell_alignment(match self.aligns.get(i) {
                Some(Align::Right) => CellAlignment::Right,
                _ => CellAlignment::Left,
            });
        }
        let pad = " ".repeat(self.indent);
        let mut s = String::new();
        for l in self.table.lines() {
            s.push_str(&pad);
            s.push_str(l.trim_end());
            s.push('\n');
        }
        s
    }
}

/// Left-aligned column `name`.
pub fn left(name: &str) -> (&str, Align) {
    (name, Align::Left)
}

/// Right-aligned column `name`.
pub fn right(name: &str) -> (&str, Align) {
    (name, Align::Right)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_their_content_and_numbers_align_right() {
        let mut g = Grid::new(2, &[left("name"), right("refs"), right("MPKI")]);
        g.row(["a long machine name", "1,234", "0.50"]);
        g.row(["b", "12,345,678", "-"]);
        assert_eq!(
            g.render(),
            "  name                       refs  MPKI\n\
             \x20 a long machine name       1,234  0.50\n\
             \x20 b                    12,345,678     -\n"
        );
    }

    #[test]
    fn nothing_is_cut_or_wrapped_and_controls_are_escaped() {
        let long = "x".repeat(300);
        let mut g = Grid::new(0, &[left("name"), right("n")]);
        g.row([long.as_str(), "1"]);
        g.row(["evil\x1b[2J\nname", "2"]);
        let s = g.render();
        assert!(s.contains(&format!("{long}  1\n")), "{s}");
        assert!(s.contains("evil\\x1b[2J\\nname"), "{s}");
        assert!(!s.contains('\x1b'));
        assert_eq!(s.lines().count(), 3, "{s}");
    }

    #[test]
    fn no_header_row_when_every_header_is_empty() {
        let mut g = Grid::new(0, &[left(""), right("")]);
        g.row(["a", "1"]).row(["bb", "22"]);
        assert_eq!(g.render(), "a    1\nbb  22\n");
    }

    #[test]
    fn wide_characters_count_as_two_columns() {
        let mut g = Grid::new(0, &[left("f"), right("n")]);
        g.row(["世界", "1"]).row(["abcd", "2"]);
        assert_eq!(g.render(), "f     n\n世界  1\nabcd  2\n");
    }
}
