//! `git session export`: write a session out.

use std::io::Write;
use std::path::PathBuf;

use super::{CommandError, Env};
use crate::ops;

/// Export a session as a canonical JSONL file.
///
/// Writes the header line, artifact lines and the stored events byte for
/// byte; `git session import --canonical` reads it back into identical events.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// Write the canonical interchange format (the only format so far).
    #[arg(long, required = true)]
    canonical: bool,
    /// Write to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    match &args.out {
        None => ops::canonical::export(&store, &id, out)?,
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
                ops::canonical::export(&store, &id, &mut w)?;
            }
            tmp.persist(path)
                .map_err(|e| CommandError::failure(format!("{}: {e}", path.display())))?;
        }
    }
    Ok(())
}
