//! Scenario errors, located in their file.
//!
//! What it is: the one error type of scenario loading (`ScenarioError`: file,
//! line, column, dotted field path, message) and the helpers that find a
//! field path such as `domain[1].workload.model` in the TOML text, so that a
//! semantic error (unknown model, out-of-range number) points at its line.
//!
//! May import: the standard library and `toml_edit`. Must never import the
//! engine, the rest of `scenario`, or anything above them: every other module
//! that reports a bad input (scenario loading, variable substitution, the
//! runner) uses this type, so it sits at the bottom.

use std::fmt;

/// A scenario error, located in its file.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioError {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub col: Option<usize>,
    /// Field path (may be empty).
    pub path: String,
    /// What is wrong and what is allowed.
    pub msg: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.col {
                write!(f, ":{c}")?;
            }
        }
        if self.path.is_empty() {
            write!(f, ": {}", self.msg)
        } else {
            write!(f, ": field `{}`: {}", self.path, self.msg)
        }
    }
}

impl std::error::Error for ScenarioError {}

/// An error at a field path, located in `text` when the path is found there.
pub(crate) fn error_at(text: &str, file: &str, path: &str, msg: String) -> ScenarioError {
    let (line, col) =
        locate(text, path).map(|o| line_col(text, o)).map(|(l, c)| (Some(l), Some(c))).unwrap_or((None, None));
    ScenarioError { file: file.into(), line, col, path: path.into(), msg }
}

pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let off = offset.min(text.len());
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|s| s.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

/// Find the byte offset of a dotted path (`a.b[2].c`) in TOML text.
fn locate(text: &str, path: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text.to_string()).ok()?;
    let mut segs = Vec::new();
    for part in path.split('.') {
        let (key, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        segs.push((key.to_string(), None));
        for idx in rest.split('[').skip(1) {
            if let Ok(i) = idx.trim_end_matches(']').parse::<usize>() {
                segs.push((String::new(), Some(i)));
            }
        }
    }
    enum Node<'a> {
        Item(&'a toml_edit::Item),
        Value(&'a toml_edit::Value),
        Table(&'a toml_edit::Table),
    }
    let mut node = Node::Table(doc.as_table());
    let mut best: Option<usize> = None;
    for (key, idx) in segs {
        let next = match (&node, idx) {
            (Node::Table(t), None) => {
                if let Some((k, _)) = t.get_key_value(&key) {
                    best = k.span().map(|s| s.start).or(best);
                }
                t.get(&key).map(Node::Item)
            }
            (Node::Item(it), None) => match it {
                toml_edit::Item::Table(t) => {
                    if let Some((k, _)) = t.get_key_value(&key) {
                        best = k.span().map(|s| s.start).or(best);
                    }
                    t.get(&key).map(Node::Item)
                }
                toml_edit::Item::Value(toml_edit::Value::InlineTable(t)) => {
                    if let Some((k, _)) = t.get_key_value(&key) {
                        best = k.span().map(|s| s.start).or(best);
                    }
                    t.get(&key).map(Node::Value)
                }
                _ => None,
            },
            (Node::Value(toml_edit::Value::InlineTable(t)), None) => {
                if let Some((k, _)) = t.get_key_value(&key) {
                    best = k.span().map(|s| s.start).or(best);
                }
                t.get(&key).map(Node::Value)
            }
            (Node::Item(toml_edit::Item::ArrayOfTables(a)), Some(i)) => a.get(i).map(|t| {
                best = t.span().map(|s| s.start).or(best);
                Node::Table(t)
            }),
            (Node::Item(toml_edit::Item::Value(toml_edit::Value::Array(a))), Some(i))
            | (Node::Value(toml_edit::Value::Array(a)), Some(i)) => a.get(i).map(|v| {
                best = v.span().map(|s| s.start).or(best);
                Node::Value(v)
            }),
            _ => None,
        };
        match next {
            Some(n) => {
                if let Node::Item(toml_edit::Item::Value(v)) = &n {
                    best = v.span().map(|s| s.start).or(best);
                }
                node = n;
            }
            None => break,
        }
    }
    best
}

impl ScenarioError {
    /// An error at a field path (may be empty) with no line or column.
    pub fn plain(file: &str, path: &str, msg: String) -> ScenarioError {
        ScenarioError { file: file.into(), line: None, col: None, path: path.into(), msg }
    }
}
