//! Strict minijinja rendering of the matrix file's templates.
//!
//! All templates are compiled once; each cell renders them with its own
//! `matrix` and the file's `vars`. An undefined variable is an error that
//! names the file, the line inside the file, the field and the cell.

use std::collections::BTreeMap;
use std::path::Path;

use minijinja::{Environment, UndefinedBehavior, Value};

use crate::matrix_file::{Pos, SpecError, Template};

/// Instructions one template may run for one cell (minijinja's fuel). A
/// template that substitutes values and takes a branch or two runs a few
/// dozen; loops over `range()` nested three deep would run 10^15.
pub const TEMPLATE_FUEL: u64 = 100_000;

/// The most bytes one rendered template may be: a step's script, a package
/// list. Real ones are a few KiB.
pub const TEMPLATE_OUTPUT_MAX: usize = 1 << 20;

/// The most memory rendering one template for one cell may hold (enforced
/// by the binary's allocator, `src/budget.rs`): strings built with `~` or
/// `replace` double in one instruction, so fuel alone cannot bound them.
pub const TEMPLATE_MEMORY: usize = 64 << 20;

pub struct Renderer {
    env: Environment<'static>,
    file: std::path::PathBuf,
    templates: BTreeMap<String, Template>,
}

impl Renderer {
    pub fn new(file: &Path) -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_keep_trailing_newline(true);
        env.set_fuel(Some(TEMPLATE_FUEL));
        Renderer {
            env,
            file: file.to_path_buf(),
            templates: BTreeMap::new(),
        }
    }

    /// The matrix file the templates are from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Compiles `t` under its field name; syntax errors point into the file.
    pub fn add(&mut self, t: &Template) -> Result<(), SpecError> {
        if self.templates.contains_key(&t.field) {
            return Ok(());
        }
        self.env
            .add_template_owned(t.field.clone(), t.source.clone())
            .map_err(|e| self.error(t, &e, None))?;
        self.templates.insert(t.field.clone(), t.clone());
        Ok(())
    }

    /// Renders a template added before with the context of one cell.
    pub fn render(&self, t: &Template, ctx: &Value, cell: &str) -> Result<String, SpecError> {
        self.render_for(t, ctx, Subject::Cell(cell))
    }

    /// Renders a template added before for a cell or a build.
    pub fn render_for(
        &self,
        t: &Template,
        ctx: &Value,
        subject: Subject<'_>,
    ) -> Result<String, SpecError> {
        let cell = subject.describe();
        let cell = cell.as_str();
        if !t.source.contains("{{") && !t.source.contains("{%") {
            return Ok(t.source.clone());
        }
        let tmpl = self
            .env
            .get_template(&t.field)
            .map_err(|e| self.error(t, &e, Some(subject)))?;
        let _budget = crate::budget::Guard::arm(
            TEMPLATE_MEMORY,
            format!(
                "{}:{}:{}: {}: the template needs more than {} MiB of memory (rendering {cell}); \
                 a template may not build strings that large",
                self.file.display(),
                t.pos.line,
                t.pos.col,
                t.field,
                TEMPLATE_MEMORY >> 20
            ),
        );
        let mut out = Capped {
            text: Vec::new(),
            over: false,
        };
        let result = tmpl.render_captured_to(ctx, &mut out).map(|_| ());
        if out.over {
            return Err(SpecError::new(
                &self.file,
                Some(t.pos),
                format!(
                    "{}: the template renders to more than {} MiB (rendering {cell}); \
                     rendered templates are limited to that",
                    t.field,
                    TEMPLATE_OUTPUT_MAX >> 20
                ),
            ));
        }
        result.map_err(|e| self.error(t, &e, Some(subject)))?;
        String::from_utf8(out.text).map_err(|_| {
            SpecError::new(
                &self.file,
                Some(t.pos),
                format!(
                    "{}: the template renders to text that is not UTF-8",
                    t.field
                ),
            )
        })
    }

    fn error(&self, t: &Template, e: &minijinja::Error, cell: Option<Subject<'_>>) -> SpecError {
        let inner = e.line().unwrap_or(1);
        let source_line = t
            .source
            .lines()
            .nth(inner.saturating_sub(1))
            .unwrap_or("")
            .trim();
        // A template's position is that of its first character (for a block
        // scalar, `run: |`, its first content line), so lines add up.
        let pos = Pos {
            line: t.pos.line + inner - 1,
            col: if inner == 1 { t.pos.col } else { 1 },
        };
        let what = match e.kind() {
            minijinja::ErrorKind::UndefinedError => "undefined variable".to_string(),
            minijinja::ErrorKind::OutOfFuel => format!(
                "the template runs more than {TEMPLATE_FUEL} instructions (loops too long or nested too deep)"
            ),
            _ => e
                .detail()
                .map(str::to_string)
                .unwrap_or_else(|| e.kind().to_string()),
        };
        let available = match cell {
            Some(Subject::Build(_)) => {
                "matrix.<key equal in all the build's cells>, build.<key> (a list), vars.<name>"
            }
            _ => "matrix.<key>, vars.<name>",
        };
        let detail = if matches!(e.kind(), minijinja::ErrorKind::UndefinedError) {
            format!("{what} in `{source_line}` (available: {available})")
        } else {
            format!("{what} in `{source_line}`")
        };
        let msg = match cell {
            Some(c) => format!("{}: {detail} (rendering {})", t.field, c.describe()),
            None => format!("{}: {detail}", t.field),
        };
        SpecError::new(&self.file, Some(pos), msg)
    }
}

/// What a template is rendered for, as error messages name it.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    Cell(&'a str),
    /// A build stage, by its key.
    Build(&'a str),
}

impl Subject<'_> {
    pub fn describe(&self) -> String {
        match self {
            Subject::Cell(id) => format!("cell {id}"),
            Subject::Build(key) => format!("build {key}"),
        }
    }
}

/// A rendering's output, refusing more than [`TEMPLATE_OUTPUT_MAX`] bytes.
struct Capped {
    text: Vec<u8>,
    over: bool,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.text.len() + buf.len() > TEMPLATE_OUTPUT_MAX {
            self.over = true;
            return Err(std::io::Error::other("rendered template too large"));
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The template context of one cell.
pub fn context(values: &[(String, String)], vars: &BTreeMap<String, String>, id: &str) -> Value {
    let matrix: BTreeMap<&str, &str> = values
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    minijinja::context! {
        matrix => matrix,
        vars => vars,
        cell => minijinja::context! { id => id },
    }
}

/// The template context of a build: `matrix` holds the keys equal in all
/// of its cells, `build.<key>` every value of that key among them.
pub fn build_context(
    matrix: &[(String, String)],
    values: &BTreeMap<String, Vec<String>>,
    vars: &BTreeMap<String, String>,
) -> Value {
    let matrix: BTreeMap<&str, &str> = matrix
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    minijinja::context! {
        matrix => matrix,
        build => values,
        vars => vars,
    }
}
