//! Plain-text tables for terminals: a header, then rows of cells in
//! columns of fixed width, one space apart.

/// How a column lays out its cells.
#[derive(Debug, Clone, Copy)]
pub enum Col {
    Left(usize),
    Right(usize),
    /// The last column, free width, set off by one more space.
    Tail,
}

pub struct Table {
    cols: Vec<Col>,
    text: String,
}

impl Table {
    /// A table with these column titles and layouts.
    pub fn new(header: &[(&str, Col)]) -> Table {
        let mut t = Table {
            cols: header.iter().map(|h| h.1).collect(),
            text: String::new(),
        };
        t.row(header.iter().map(|h| h.0.to_string()));
        t
    }

    /// One row; cells beyond the columns are dropped.
    pub fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        for (k, (cell, col)) in cells.into_iter().zip(&self.cols).enumerate() {
            if k > 0 {
                self.text.push(' ');
            }
            let laid = match *col {
                Col::Left(w) => format!("{cell:<w$}"),
                Col::Right(w) => format!("{cell:>w$}"),
                Col::Tail => format!(" {cell}"),
            };
            self.text.push_str(&laid);
        }
        self.text.push('\n');
    }

    pub fn text(self) -> String {
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_as_format_would() {
        let mut t = Table::new(&[("name", Col::Left(6)), ("time", Col::Right(8)), ("who", Col::Tail)]);
        t.row(["a".to_string(), format!("{:.3}s", 1.5), "w1 w2".to_string()]);
        let want = format!("{:<6} {:>8}  who\n{:<6} {:>7.3}s  w1 w2\n", "name", "time", "a", 1.5);
        assert_eq!(t.text(), want);
    }
}
