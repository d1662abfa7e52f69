//! `git session export`: write a session out.

use std::io::Write;
use std::path::PathBuf;

use super::{CommandError, Env};
use crate::ops;

/// Export a session: the canonical JSONL file, or a readable transcript.
///
/// `--canonical` (or `--format canonical`) writes the header line,
/// artifact lines and the stored events byte for byte; `git session import
/// --canonical` reads it back into identical events. `--format md` and
/// `--format html` write a transcript to read or paste into a pull request:
/// messages in order, tool calls and results folded (output cut at 200
/// lines), images inline in HTML, redaction markers as stored, meta events
/// left out. Agent text is escaped: it cannot inject HTML, scripts or
/// terminal codes.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// Write the canonical interchange format (same as --format canonical).
    #[arg(long, conflicts_with = "format")]
    canonical: bool,
    /// What to write: canonical, md (Markdown) or html.
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        required_unless_present = "canonical"
    )]
    format: Option<Format>,
    /// Write to this file instead of stdout (`-` is stdout).
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Canonical,
    Md,
    Html,
}

fn write(
    store: &crate::store::Store,
    id: &git_session_schema::SessionId,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    use super::transcript;
    match format {
        Format::Canonical => Ok(ops::canonical::export(store, id, out)?),
        Format::Md => transcript::write(store, id, transcript::Format::Markdown, out),
        Format::Html => transcript::write(store, id, transcript::Format::Html, out),
    }
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    let format = args.format.unwrap_or(Format::Canonical);
    match args.out.as_ref().filter(|p| p.as_os_str() != "-") {
        None => write(&store, &id, format, out)?,
        Some(path) => {
            // Write beside the target and rename, so a failed export never
            // leaves a truncated file under the requested name.
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            let mut tmp = tempfile::NamedTempFile::new_in(dir)
                .map_err(|e| CommandError::failure(format!("{}: {e}", dir.display())))?;
            {
                let mut w = std::io::BufWriter::new(tmp.as_file_mut());
                write(&store, &id, format, &mut w)?;
                w.flush()?;
            }
            tmp.persist(path)
                .map_err(|e| CommandError::failure(format!("{}: {e}", path.display())))?;
        }
    }
    Ok(())
}
