//! Aligned columns for a terminal: a header, then one line per row, each column as
//! wide as its widest cell, two spaces between. The last column is not padded.
//!
//! Cells hold what hosts and upstreams sent (a host's name, an error's message): their
//! control characters are replaced, so that nothing a peer wrote moves the cursor or
//! changes the terminal's colours. A cell's colour is added after its padding, so it
//! does not count towards the width.

use mcpx_history::Outcome;

/// How a column's cells sit in its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text: padded on the right.
    Left,
    /// Numbers: padded on the left.
    Right,
}

/// One cell: its text, and the colour it has on a terminal (an SGR code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    text: String,
    colour: Option<&'static str>,
}

impl Cell {
    /// A cell of `text`, its control characters replaced; `-` when it is empty.
    pub fn new(text: &str) -> Cell {
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { '\u{fffd}' } else { c })
            .collect();
        Cell {
            text: if text.is_empty() {
                "-".to_owned()
            } else {
                text
            },
            colour: None,
        }
    }

    /// A cell of `text`, or `-`.
    pub fn opt(text: Option<&str>) -> Cell {
        Cell::new(text.unwrap_or(""))
    }

    /// The cell of an outcome, in its colour.
    pub fn outcome(o: Outcome) -> Cell {
        Cell {
            text: o.as_str().to_owned(),
            colour: Some(colour_of(o)),
        }
    }

    /// Its width in characters.
    fn width(&self) -> usize {
        self.text.chars().count()
    }
}

/// An outcome's colour: green for a result, yellow for a tool's error, red for the
/// rest but a cancellation (grey): the host chose that.
const fn colour_of(o: Outcome) -> &'static str {
    match o {
        Outcome::Result => "32",
        Outcome::ToolError => "33",
        Outcome::Error | Outcome::Transport => "31",
        Outcome::Timeout => "35",
        Outcome::Cancelled => "90",
    }
}

/// Whether stdout gets colours: it is a terminal and `NO_COLOR` is unset or empty.
pub fn colour_on_stdout() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The columns: their heads, alignments and widths.
#[derive(Debug, Clone)]
pub struct Table {
    heads: Vec<&'static str>,
    align: Vec<Align>,
    widths: Vec<usize>,
    colour: bool,
}

impl Table {
    /// Columns headed `heads`, as wide as their heads; cells coloured when `colour`.
    pub fn new(heads: &[(&'static str, Align)], colour: bool) -> Table {
        Table {
            heads: heads.iter().map(|(h, _)| *h).collect(),
            align: heads.iter().map(|(_, a)| *a).collect(),
            widths: heads.iter().map(|(h, _)| h.chars().count()).collect(),
            colour,
        }
    }

    /// Each column at least as wide as `min` says.
    pub fn at_least(mut self, min: &[usize]) -> Table {
        for (w, m) in self.widths.iter_mut().zip(min) {
            *w = (*w).max(*m);
        }
        self
    }

    /// Widens the columns to fit `rows`.
    pub fn fit(&mut self, rows: &[Vec<Cell>]) {
        for row in rows {
            for (w, c) in self.widths.iter_mut().zip(row) {
                *w = (*w).max(c.width());
            }
        }
    }

    /// The header line.
    pub fn header(&self) -> String {
        let cells: Vec<Cell> = self.heads.iter().map(|h| Cell::new(h)).collect();
        self.line_of(&cells, false)
    }

    /// The line of one row; a cell wider than its column pushes the rest right.
    pub fn line(&self, row: &[Cell]) -> String {
        self.line_of(row, self.colour)
    }

    fn line_of(&self, row: &[Cell], colour: bool) -> String {
        let mut out = String::new();
        let last = row.len().min(self.widths.len()).saturating_sub(1);
        for (i, (cell, width)) in row.iter().zip(&self.widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            let pad = " ".repeat(width.saturating_sub(cell.width()));
            let text = match (colour, cell.colour) {
                (true, Some(c)) => format!("\x1b[{c}m{}\x1b[0m", cell.text),
                _ => cell.text.clone(),
            };
            match self.align[i] {
                Align::Left if i == last => out.push_str(&text),
                Align::Left => {
                    out.push_str(&text);
                    out.push_str(&pad);
                }
                Align::Right => {
                    out.push_str(&pad);
                    out.push_str(&text);
                }
            }
        }
        out
    }
}

/// `text` cut to `max` characters, ending with `…` when cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_the_last_is_not_padded() {
        let mut t = Table::new(
            &[("A", Align::Left), ("N", Align::Right), ("Z", Align::Left)],
            false,
        );
        let rows = vec![
            vec![Cell::new("long"), Cell::new("1"), Cell::new("x")],
            vec![Cell::new(""), Cell::new("100"), Cell::new("yy")],
        ];
        t.fit(&rows);
        assert_eq!(t.header(), "A       N  Z");
        assert_eq!(t.line(&rows[0]), "long    1  x");
        assert_eq!(t.line(&rows[1]), "-     100  yy");
    }

    #[test]
    fn a_colour_does_not_count_towards_the_width() {
        let mut t = Table::new(&[("OUTCOME", Align::Left), ("MS", Align::Right)], true);
        let row = vec![Cell::outcome(Outcome::Error), Cell::new("1.0")];
        t.fit(std::slice::from_ref(&row));
        assert_eq!(t.line(&row), "\x1b[31merror\x1b[0m    1.0");
    }

    #[test]
    fn a_peer_s_control_characters_are_replaced() {
        assert_eq!(Cell::new("a\x1b[2Jb\n").text, "a\u{fffd}[2Jb\u{fffd}");
    }

    #[test]
    fn long_text_is_cut() {
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abcd", 4), "abcd");
    }
}
