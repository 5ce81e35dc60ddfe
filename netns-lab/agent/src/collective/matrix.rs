//! Byte matrices for the `matrix` collective: CSV or JSON text to a square matrix of bytes,
//! every problem named by its line.

use super::PlanError;

/// Parses a square byte matrix, rows = sources, columns = destinations.
///
/// * JSON: `[[0, 1048576], [524288, 0]]`.
/// * CSV: one row per line, fields separated by commas (or semicolons, tabs, spaces); blank
///   lines and `#` comments are skipped, and so is a first row with no number in it (a header).
///
/// Entries are non-negative byte counts; fractional values (e.g. averaged traces) are rounded
/// to the nearest byte.
///
/// # Errors
/// [`PlanError::Matrix`] naming the line (row) of the first problem.
pub fn parse_matrix(text: &str) -> Result<Vec<Vec<u64>>, PlanError> {
    let rows = if text.trim_start().starts_with('[') {
        parse_json_matrix(text)?
    } else {
        parse_csv_matrix(text)?
    };
    let size = rows.len();
    if size == 0 {
        return Err(PlanError::Matrix {
            line: 1,
            reason: "empty matrix".to_owned(),
        });
    }
    for (line, row) in &rows {
        if row.len() != size {
            return Err(PlanError::Matrix {
                line: *line,
                reason: format!(
                    "{} columns, but the matrix has {size} rows (it must be square)",
                    row.len()
                ),
            });
        }
    }
    Ok(rows.into_iter().map(|(_, row)| row).collect())
}

fn byte_count(value: f64, line: usize, field: &str) -> Result<u64, PlanError> {
    if !(0.0..=1e18).contains(&value) {
        return Err(PlanError::Matrix {
            line,
            reason: format!("`{field}` is not a byte count (non-negative, at most 1e18)"),
        });
    }
    Ok(value.round() as u64)
}

fn parse_json_matrix(text: &str) -> Result<Vec<(usize, Vec<u64>)>, PlanError> {
    let rows: Vec<Vec<serde_json::Value>> =
        serde_json::from_str(text).map_err(|e| PlanError::Matrix {
            line: e.line(),
            reason: format!("JSON: {e} (expected an array of arrays of numbers)"),
        })?;
    rows.into_iter()
        .enumerate()
        .map(|(index, row)| {
            let line = index + 1;
            let values = row
                .iter()
                .map(|value| {
                    let number = value.as_f64().ok_or_else(|| PlanError::Matrix {
                        line,
                        reason: format!("`{value}` is not a number"),
                    })?;
                    byte_count(number, line, &value.to_string())
                })
                .collect::<Result<Vec<u64>, PlanError>>()?;
            Ok((line, values))
        })
        .collect()
}

fn parse_csv_matrix(text: &str) -> Result<Vec<(usize, Vec<u64>)>, PlanError> {
    let mut rows = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let fields: Vec<&str> = content
            .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
            .filter(|field| !field.is_empty())
            .collect();
        let numbers: Vec<Option<f64>> = fields.iter().map(|f| f.parse::<f64>().ok()).collect();
        if rows.is_empty() && numbers.iter().all(Option::is_none) {
            continue; // a header row
        }
        let values = fields
            .iter()
            .zip(numbers)
            .map(|(field, number)| match number {
                Some(number) => byte_count(number, line, field),
                None => Err(PlanError::Matrix {
                    line,
                    reason: format!("`{field}` is not a number"),
                }),
            })
            .collect::<Result<Vec<u64>, PlanError>>()?;
        rows.push((line, values));
    }
    Ok(rows)
}
