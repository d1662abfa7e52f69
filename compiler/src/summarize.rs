//! The P2 summarizer: the built-in extractive one, and the hook for an
//! external one.
//!
//! The default is extractive and deterministic: each message contributes
//! its leading sentences, so the same session always gives byte-identical
//! output and nothing is invented. An external summarizer (a local model,
//! a cloud call, `--summarizer-cmd`) plugs in through [`Summarizer`]; the
//! compiler never runs it itself, it only calls the trait. The root crate
//! implements the trait by running the command with a [`SummaryRequest`]
//! as JSON on stdin and parsing stdout with [`parse_summaries`].
//!
//! If the external summarizer fails, or answers with something unusable,
//! the compiler falls back to the extractive excerpts and says so in
//! `Compiled::warnings`; a summarizer can cost quality, never the handoff.

use serde::{Deserialize, Serialize};

use crate::extract::{Excerpt, cut_chars, sentences};
use crate::render::flat;

/// Characters kept from one user message, and from one assistant message.
const USER_CHARS: usize = 320;
const ASSISTANT_CHARS: usize = 240;

/// Holds what an external summarizer is asked to condense.
///
/// Serialized as JSON, this is the stdin of a `--summarizer-cmd`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryRequest {
    /// The session's id.
    pub session: String,
    /// The agent the context is for.
    pub target: String,
    /// The tokenizer the budget is counted with (`o200k_base`, ...).
    pub tokenizer: String,
    /// Tokens the summaries may use in total, as rendered; more is cut.
    pub budget_tokens: usize,
    /// The conversation, oldest first: the newest messages up to about
    /// 200,000 characters in all (each message at most 4000).
    pub excerpts: Vec<Excerpt>,
}

/// Holds one summary statement and the messages it rests on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The statement: a conclusion, in one paragraph.
    pub text: String,
    /// The excerpts' `seq`s it summarizes (its evidence); at least one.
    pub seqs: Vec<u64>,
}

/// Condenses conversation excerpts into cited summaries.
///
/// Implementations may do IO (run a command, call a model); the compiler
/// does not. An `Err` makes the compiler fall back to extractive excerpts.
///
/// A `--summarizer-cmd` in the root crate looks like this (sketch):
///
/// ```ignore
/// struct Command(String);
/// impl Summarizer for Command {
///     fn name(&self) -> String { format!("cmd:{}", self.0) }
///     fn summarize(&self, req: &SummaryRequest) -> Result<Vec<Summary>, SummarizerError> {
///         let failed = |message: String, e| SummarizerError::Failed { message, source: Some(Box::new(e)) };
///         let mut child = std::process::Command::new("sh").arg("-c").arg(&self.0)
///             .stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()
///             .map_err(|e| failed(format!("cannot run {}", self.0), e))?;
///         serde_json::to_writer(child.stdin.take().unwrap(), req).map_err(SummarizerError::Malformed)?;
///         let out = child.wait_with_output().map_err(|e| failed("wait".into(), e))?;
///         if !out.status.success() { return Err(SummarizerError::Failed { message: format!("{} exited with {}", self.0, out.status), source: None }) }
///         parse_summaries(&out.stdout)
///     }
/// }
/// ```
pub trait Summarizer {
    /// Returns a short name for records and warnings (`cmd:my-summarizer`).
    fn name(&self) -> String;

    /// Returns summaries of `request.excerpts`, most important first.
    ///
    /// Each summary must cite at least one of the excerpts' `seq`s. The
    /// compiler keeps summaries in the given order until
    /// `request.budget_tokens` is used up.
    fn summarize(&self, request: &SummaryRequest) -> Result<Vec<Summary>, SummarizerError>;
}

/// Says why an external summary could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SummarizerError {
    /// The summarizer could not run or reported a failure.
    #[error("{message}")]
    Failed {
        /// What went wrong, for the warning.
        message: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Its output is not `{"summaries": [{"text": ..., "seqs": [...]}]}`.
    #[error("malformed summarizer output: {0}")]
    Malformed(#[source] serde_json::Error),
    /// A summary cites no excerpt, or a seq it was not given.
    #[error("summary {index} cites {cited}, which is not among the excerpts it was given")]
    BadCitation {
        /// Position of the summary in the answer, from 0.
        index: usize,
        /// What it cited.
        cited: String,
    },
    /// A summary has no text.
    #[error("summary {index} is empty")]
    Empty {
        /// Position of the summary in the answer, from 0.
        index: usize,
    },
}

/// Returns the summaries in an external summarizer's JSON output.
///
/// The expected shape is `{"summaries": [{"text": "...", "seqs": [3, 7]}]}`;
/// unknown members are ignored.
pub fn parse_summaries(stdout: &[u8]) -> Result<Vec<Summary>, SummarizerError> {
    #[derive(Deserialize)]
    struct Response {
        summaries: Vec<Summary>,
    }
    let response: Response = serde_json::from_slice(stdout).map_err(SummarizerError::Malformed)?;
    Ok(response.summaries)
}

/// Checks summaries against the excerpts they were made from.
pub(crate) fn validate(summaries: &[Summary], excerpts: &[Excerpt]) -> Result<(), SummarizerError> {
    for (index, s) in summaries.iter().enumerate() {
        if s.text.trim().is_empty() {
            return Err(SummarizerError::Empty { index });
        }
        let known = |seq: &u64| excerpts.binary_search_by_key(seq, |x| x.seq).is_ok();
        if s.seqs.is_empty() || !s.seqs.iter().all(known) {
            return Err(SummarizerError::BadCitation {
                index,
                cited: format!("{:?}", s.seqs),
            });
        }
    }
    Ok(())
}

/// Returns the extractive summary of one message: its leading sentences,
/// on one line, within a per-role length.
pub(crate) fn extract(excerpt: &Excerpt) -> String {
    let max = if excerpt.role == "user" {
        USER_CHARS
    } else {
        ASSISTANT_CHARS
    };
    let text = flat(&excerpt.text, usize::MAX);
    let mut out = String::new();
    for sentence in sentences(&text) {
        if out.chars().count() + sentence.chars().count() > max {
            break;
        }
        out.push_str(sentence);
    }
    let out = out.trim();
    if out.is_empty() {
        // The first sentence alone is too long: cut it.
        cut_chars(&text, max)
    } else if out.len() < text.len() {
        format!("{out} …")
    } else {
        out.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(seq: u64, role: &str, text: &str) -> Excerpt {
        Excerpt {
            seq,
            role: role.into(),
            text: text.into(),
        }
    }

    #[test]
    fn extract_keeps_leading_sentences_within_the_limit() {
        let long = format!("First point. {}", "word ".repeat(100));
        assert_eq!(extract(&ex(1, "assistant", &long)), "First point. …");
        assert_eq!(extract(&ex(1, "user", "Short.\nTwo.")), "Short. Two.");
        let one = "x".repeat(500);
        assert_eq!(
            extract(&ex(1, "assistant", &one)).chars().count(),
            ASSISTANT_CHARS + 1
        );
    }

    #[test]
    fn summaries_must_cite_known_excerpts() {
        let excerpts = [ex(3, "user", "a"), ex(7, "assistant", "b")];
        let good = parse_summaries(br#"{"summaries":[{"text":"t","seqs":[3,7]}]}"#).unwrap();
        assert!(validate(&good, &excerpts).is_ok());
        let bad = parse_summaries(br#"{"summaries":[{"text":"t","seqs":[4]}]}"#).unwrap();
        assert!(matches!(
            validate(&bad, &excerpts),
            Err(SummarizerError::BadCitation { index: 0, .. })
        ));
        assert!(parse_summaries(b"not json").is_err());
    }
}
