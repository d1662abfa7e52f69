//! `git session export --format md|html`: a readable transcript (the
//! thing people paste into pull requests): messages in order, tool calls
//! and their results folded, images inline in HTML, redaction markers as
//! stored. Meta events are left out.
//!
//! Agent text is untrusted: control characters and bidirectional overrides
//! are escaped (no terminal codes survive), HTML special characters become
//! entities in both formats (no tag or script an agent wrote is
//! interpreted), code fences are longer than any backtick run inside them,
//! and the HTML page carries a Content-Security-Policy that allows no
//! script and only inline images.

use std::collections::HashMap;
use std::io::Write;

use git_session_schema::{ArtifactId, Event};
use serde_json::Value;

use super::CommandError;
use super::show::{Calls, call_text, output_text, summary};
use crate::store::Store;

/// The transcript formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Html,
}

/// Lines of a tool's output kept in the transcript.
const OUTPUT_LINES: usize = 200;
/// Images larger than this are named, not embedded.
const IMAGE_LIMIT: usize = 8 << 20;

/// Escapes control characters (except newline and tab) and bidirectional
/// overrides, as the terminal output does.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| {
            if (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
            {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Escapes for HTML text and attribute values (after [`clean`]).
fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in clean(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Returns a fenced block holding `text` verbatim (cleaned): the fence is
/// longer than any backtick run in it, so the text cannot close it.
fn fenced(text: &str) -> String {
    let text = clean(text);
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}text\n{}\n{fence}", text.trim_end_matches('\n'))
}

fn head_lines(text: &str) -> String {
    let total = text.lines().count();
    let mut kept: Vec<&str> = text.lines().take(OUTPUT_LINES).collect();
    let more;
    if total > OUTPUT_LINES {
        more = format!("… {} more lines", total - OUTPUT_LINES);
        kept.push(&more);
    }
    kept.join("\n")
}

/// Returns the images a payload references: (media type, artifact id).
fn images(v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            if let (Some(Value::String(t)), Some(Value::String(a))) =
                (m.get("media_type"), m.get("artifact"))
            {
                out.push((t.clone(), a.clone()));
            }
            for v in m.values() {
                images(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| images(v, out)),
        _ => {}
    }
}

fn message_text(p: &Value) -> Option<String> {
    match p.get("text").or_else(|| p.get("content"))? {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// Writes the transcript of session `id`.
pub fn write(
    store: &Store,
    id: &git_session_schema::SessionId,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let stat = store.stat(id)?;
    let h = &stat.header;
    let artifacts: HashMap<ArtifactId, gix::ObjectId> = store.artifacts(id)?.into_iter().collect();
    let title = h.title.clone().unwrap_or_else(|| format!("Session {id}"));
    let facts = [
        ("session", Some(id.to_string())),
        ("agent", Some(h.agent.to_string())),
        ("cwd", h.cwd.clone()),
        ("created", Some(h.created.clone())),
        ("events", Some(stat.events.to_string())),
    ];
    match format {
        Format::Markdown => {
            writeln!(out, "# {}\n", html(title.lines().next().unwrap_or("")))?;
            for (k, v) in facts.iter().filter_map(|(k, v)| Some((k, v.as_ref()?))) {
                writeln!(out, "- {k}: {}", html(v))?;
            }
        }
        Format::Html => {
            writeln!(
                out,
                "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n\
                 <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">\n\
                 <title>{}</title>\n<style>{STYLE}</style></head><body>\n<h1>{}</h1>\n<dl>",
                html(&title),
                html(title.lines().next().unwrap_or(""))
            )?;
            for (k, v) in facts.iter().filter_map(|(k, v)| Some((k, v.as_ref()?))) {
                writeln!(out, "<dt>{k}</dt><dd>{}</dd>", html(v))?;
            }
            writeln!(out, "</dl>")?;
        }
    }
    let mut calls = Calls::default();
    for line in store.lines(id, 0, None)? {
        let line = line?;
        let event: Event = line.decode().map_err(|e| {
            CommandError::failure(format!(
                "seq {}: stored event does not parse: {e}",
                line.seq
            ))
        })?;
        calls.note(&event);
        if event.kind == "meta" {
            continue;
        }
        let who = match event.kind.as_str() {
            "message.user" => Some("User".to_owned()),
            "message.assistant" => Some(format!("Assistant ({})", event.agent)),
            k if k.starts_with("message.") => Some(k.trim_start_matches("message.").to_owned()),
            _ => None,
        };
        let mut imgs = Vec::new();
        images(&event.payload, &mut imgs);
        match (&who, event.kind.as_str()) {
            (Some(who), _) => {
                let text = message_text(&event.payload).unwrap_or_default();
                match format {
                    Format::Markdown => {
                        writeln!(out, "\n## {who} · {}\n", html(&event.ts))?;
                        if !text.trim().is_empty() {
                            writeln!(out, "{}", html(text.trim_end()))?;
                        }
                    }
                    Format::Html => {
                        writeln!(
                            out,
                            "<section class=\"{}\"><h2>{} · {}</h2><div class=\"text\">{}</div>",
                            if event.kind == "message.user" {
                                "user"
                            } else {
                                "agent"
                            },
                            html(who),
                            html(&event.ts),
                            html(text.trim_end())
                        )?;
                    }
                }
            }
            (None, kind @ ("tool.call" | "tool.result")) => {
                let (label, body) = if kind == "tool.call" {
                    let args = event
                        .payload
                        .get("arguments")
                        .or_else(|| event.payload.get("input"))
                        .map(|a| serde_json::to_string_pretty(a).unwrap_or_default())
                        .unwrap_or_default();
                    (format!("Tool call: {}", call_text(&event.payload)), args)
                } else {
                    let output = output_text(&event.payload).unwrap_or_default();
                    (
                        format!("Result: {}", summary(&event, &calls)),
                        head_lines(&output),
                    )
                };
                let label: String = label.chars().take(200).collect();
                match format {
                    Format::Markdown => writeln!(
                        out,
                        "\n<details><summary>{}</summary>\n\n{}\n\n</details>",
                        html(&label),
                        fenced(&body)
                    )?,
                    Format::Html => writeln!(
                        out,
                        "<details><summary>{}</summary><pre>{}</pre></details>",
                        html(&label),
                        html(&body)
                    )?,
                }
            }
            (None, _) => {
                let line = format!("{}: {}", event.kind, summary(&event, &calls));
                match format {
                    Format::Markdown => writeln!(out, "\n*{}*", html(&line).replace('*', "\\*"))?,
                    Format::Html => writeln!(out, "<p class=\"event\">{}</p>", html(&line))?,
                }
            }
        }
        for (media, artifact) in imgs {
            let blob = ArtifactId::parse(&artifact).and_then(|a| artifacts.get(&a).copied());
            let embeddable = matches!(
                media.as_str(),
                "image/png" | "image/jpeg" | "image/gif" | "image/webp"
            );
            // Read through the store: opened when encrypted, the full
            // blob of a head (session.syncArtifacts head), or what to run.
            let mut head_only = None;
            let bytes = match (format, blob, embeddable) {
                (Format::Html, Some(b), true) => match store.artifact_bytes(id, b) {
                    Ok(bytes) => Some(bytes).filter(|b| b.len() <= IMAGE_LIMIT),
                    Err(e @ crate::store::StoreError::HeadOnly { .. }) => {
                        head_only = Some(e.to_string());
                        None
                    }
                    Err(_) => None,
                },
                _ => None,
            };
            if let Some(why) = &head_only {
                writeln!(
                    out,
                    "<p class=\"event\">[image {}: {}]</p>",
                    html(&artifact),
                    html(why)
                )?;
                continue;
            }
            match (format, bytes) {
                (Format::Html, Some(bytes)) => {
                    use base64::Engine;
                    writeln!(
                        out,
                        "<img alt=\"image {}\" src=\"data:{media};base64,{}\">",
                        html(&artifact),
                        base64::engine::general_purpose::STANDARD.encode(bytes)
                    )?;
                }
                (Format::Html, None) => writeln!(
                    out,
                    "<p class=\"event\">[image {} ({})]</p>",
                    html(&artifact),
                    html(&media)
                )?,
                (Format::Markdown, _) => {
                    writeln!(out, "\n*[image {} ({})]*", html(&artifact), html(&media))?
                }
            }
        }
        if who.is_some() && format == Format::Html {
            writeln!(out, "</section>")?;
        }
    }
    if format == Format::Html {
        writeln!(out, "</body></html>")?;
    }
    Ok(())
}

const STYLE: &str = "body{font-family:sans-serif;max-width:50em;margin:auto;padding:1em}\
section{margin:1em 0;padding:.5em 1em;border-left:4px solid #ccc}\
section.user{border-color:#36c}.text{white-space:pre-wrap}\
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}\
.event{color:#666;font-style:italic}img{max-width:100%}";
