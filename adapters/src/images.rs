//! Images as artifacts, shared by the adapters whose records carry them
//! as base64 text: decoded into artifact bytes on parse, encoded back on
//! render.

use base64::Engine;
use git_session_schema::ArtifactId;

use crate::RenderHead;

/// Decodes base64 image bytes into an artifact kept in `artifacts` (once
/// per content) and returns its id; `None` keeps them inline (not base64,
/// or not in the canonical encoding, which the render could not restore).
pub(crate) fn decode(data: &str, artifacts: &mut Vec<(ArtifactId, Vec<u8>)>) -> Option<ArtifactId> {
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine.decode(data).ok()?;
    // Re-encoding must give the same text, or the render would differ.
    if engine.encode(&bytes) != data {
        return None;
    }
    let id = ArtifactId::of(&bytes);
    if !artifacts.iter().any(|(a, _)| *a == id) {
        artifacts.push((id.clone(), bytes));
    }
    Some(id)
}

/// Returns an artifact's bytes as base64, or notes the loss.
pub(crate) fn encode(
    head: &RenderHead<'_>,
    losses: &mut crate::loss::Losses,
    seq: u64,
    id: &ArtifactId,
) -> Option<String> {
    match (head.artifact)(id) {
        Some(bytes) => Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        None => {
            losses.line(format!(
                "image-omitted: event {seq}: artifact {id} not provided; image written empty"
            ));
            None
        }
    }
}

/// Returns the text a render writes in place of an image the target cannot
/// hold, naming its artifact, and adds the `image-omitted` line.
pub(crate) fn placeholder(
    losses: &mut crate::loss::Losses,
    seq: u64,
    id: &ArtifactId,
    target: &str,
    place: &str,
) -> String {
    losses.add(
        "image-omitted",
        seq,
        format!("{place} image not written: {target} has no image form there; a placeholder names the artifact"),
    );
    format!("[image: {id}]")
}

/// Returns the media type of the `index`th image of an event payload
/// (`images[index].media_type`, else `image.media_type`, else PNG).
pub(crate) fn media_type(payload: &serde_json::Value, index: usize) -> String {
    payload
        .pointer(&format!("/images/{index}/media_type"))
        .or_else(|| payload.pointer("/image/media_type"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("image/png")
        .to_owned()
}
