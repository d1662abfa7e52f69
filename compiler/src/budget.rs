//! Spends the token budget (seed 000 §7.3): P0 always, P1 newest first up
//! to a share of the budget, P2 in what is left, and a final exact count.
//!
//! Items are priced one at a time by rendering and counting them alone.
//! BPE counts are not exactly additive (a merge can span the seam between
//! two pieces), so prices carry a token of slack and the whole document is
//! counted again at the end; if it is still over, the least important
//! items go until it fits. P0 alone was counted exactly and fits, so that
//! loop always ends.
//!
//! Only as much text as can fit is ever tokenized: candidates are visited
//! in priority order and the visit stops once a share is full, so the cost
//! tracks the budget, not the length of the session.

use std::collections::HashSet;

use git_session_schema::{Event, SessionHeader};

use crate::extract::{self, Excerpt};
use crate::item::{DropReason, Dropped, Item, ItemKind, Priority};
use crate::render::{self, Frame, flat};
use crate::summarize::{self, Summarizer, SummaryRequest};
use crate::{CompileError, Compiled, P1_SHARE_PERCENT, Request, Tokenizer};

/// Tokens added to each item's price for the seam with its neighbours.
const SEAM: usize = 1;
/// Consecutive candidates that did not fit before a share counts as full.
const MAX_MISSES: usize = 32;
/// Characters of conversation an external summarizer is given at most
/// (about 50k tokens), newest messages first; older ones are not sent.
const SUMMARY_INPUT_CHARS: usize = 200_000;

/// Returns the compiled context; see [`crate::compile`].
pub(crate) fn run(
    header: &SessionHeader,
    events: &[Event],
    req: &Request,
    summarizer: Option<&dyn Summarizer>,
) -> Result<Compiled, CompileError> {
    let tok = req.tokenizer();
    let budget = req.budget;
    let cands = extract::candidates(events, &req.git);
    let session = header.id.to_string();
    let agent = header.agent.to_string();
    let target = req.target.to_string();
    let frame = Frame {
        format: req.format,
        session: &session,
        agent: &agent,
        target: &target,
        title: header.title.as_deref().or(cands.title.as_deref()),
        cwd: header.cwd.as_deref(),
        events: events.len(),
        tokenizer: tok.name(),
    };
    let mut dropped = cands.dropped;
    let mut warnings = Vec::new();

    // P0: the document with P0 only, and every other candidate counted as
    // left out, is exactly what a tiny budget would produce.
    let most_omitted = cands.p1.len() + cands.excerpts.len();
    let p0: Vec<&Item> = cands.p0.iter().collect();
    let needed = tok.count(&render::render(&frame, &p0, most_omitted));
    if needed > budget {
        return Err(CompileError::OverBudget {
            needed,
            budget,
            over: needed - budget,
            tokenizer: tok.name(),
        });
    }
    let mut fill = Fill {
        tok,
        format: req.format,
        used: needed,
        budget,
        open: p0.iter().map(|i| i.kind).collect(),
        kept: Vec::new(),
    };

    // P1: newest first, skipping what does not fit, up to its share.
    // u128: a budget near usize::MAX must not overflow the share.
    let share = (budget as u128 * P1_SHARE_PERCENT as u128 / 100) as usize;
    let p1_cap = needed.saturating_add(share);
    let mut misses = 0;
    for item in &cands.p1 {
        if misses < MAX_MISSES && fill.try_add(item.clone(), p1_cap) {
            misses = 0;
        } else {
            misses += 1;
            dropped.push(cut(item));
        }
    }

    // P2: external summaries if given and usable, else extractive excerpts.
    let mut summarizer_name = "extractive".to_owned();
    let mut external = None;
    if let Some(s) = summarizer {
        let request = SummaryRequest {
            session: session.clone(),
            target: target.clone(),
            tokenizer: tok.name().to_owned(),
            budget_tokens: budget.saturating_sub(fill.used),
            excerpts: newest_within(&cands.excerpts, SUMMARY_INPUT_CHARS),
        };
        match s
            .summarize(&request)
            .and_then(|sum| summarize::validate(&sum, &request.excerpts).map(|()| sum))
        {
            Ok(sum) => {
                summarizer_name = s.name();
                external = Some(sum);
            }
            Err(e) => warnings.push(format!(
                "summarizer {} failed, using extractive excerpts instead: {e}",
                s.name()
            )),
        }
    }
    match external {
        Some(summaries) => {
            let mut cited: HashSet<u64> = HashSet::new();
            let mut cut_summaries = 0;
            for s in summaries {
                let mut seqs = s.seqs;
                seqs.sort_unstable();
                seqs.dedup();
                let item = Item {
                    priority: Priority::P2,
                    kind: ItemKind::Summary,
                    label: flat(&s.text, usize::MAX),
                    body: None,
                    seqs,
                };
                if fill.try_add(item.clone(), budget) {
                    cited.extend(item.seqs.iter().copied());
                } else {
                    cut_summaries += 1;
                    dropped.push(cut(&item));
                }
            }
            if cut_summaries > 0 {
                warnings.push(format!(
                    "{cut_summaries} summaries from {summarizer_name} did not fit the budget"
                ));
            }
            let uncited: Vec<u64> = cands
                .excerpts
                .iter()
                .map(|x| x.seq)
                .filter(|s| !cited.contains(s))
                .collect();
            if !uncited.is_empty() {
                dropped.push(Dropped {
                    what: ItemKind::Excerpt.name().into(),
                    priority: Some(Priority::P2),
                    reason: DropReason::NotSummarized,
                    label: None,
                    seqs: uncited,
                });
            }
        }
        None => fill_excerpts(&mut fill, &cands.excerpts, &mut dropped),
    }
    // Final exact count; trim from the least important end until it fits.
    let mut omitted: usize = dropped
        .iter()
        .filter(|d| d.reason == DropReason::Budget)
        .map(|d| match d.what.as_str() {
            "excerpt" => d.seqs.len(),
            _ => 1,
        })
        .sum();
    loop {
        let refs = fill.in_order(&p0);
        let text = render::render(&frame, &refs, omitted);
        let tokens = tok.count(&text);
        if tokens <= budget {
            let mut items: Vec<Item> = refs.into_iter().cloned().collect();
            items.sort_by_key(|i| i.kind);
            dropped.sort_by(|a, b| {
                (a.seqs.first(), &a.what, a.reason as u8).cmp(&(
                    b.seqs.first(),
                    &b.what,
                    b.reason as u8,
                ))
            });
            return Ok(Compiled {
                text,
                tokens,
                budget,
                tokenizer: tok,
                format: req.format,
                target: req.target.clone(),
                items,
                dropped,
                summarizer: summarizer_name,
                warnings,
            });
        }
        let mut excess = tokens - budget;
        while excess > 0 {
            let Some(pos) = fill.least_important() else {
                // Only P0 is left: the P0 document counted at the start
                // (with the largest omitted count) is known to fit.
                omitted = most_omitted;
                break;
            };
            let (item, price) = fill.kept.remove(pos);
            excess = excess.saturating_sub(price);
            omitted += 1;
            dropped.push(cut(&item));
        }
    }
}

/// Tracks what has been kept and how much of the budget it takes.
struct Fill {
    tok: Tokenizer,
    format: render::Format,
    used: usize,
    budget: usize,
    /// Sections that already have their heading paid for.
    open: HashSet<ItemKind>,
    /// Kept P1/P2 items with their price, in the order they were added.
    kept: Vec<(Item, usize)>,
}

impl Fill {
    /// Keeps `item` if its price fits under `cap` (and the budget).
    fn try_add(&mut self, item: Item, cap: usize) -> bool {
        let room = cap.min(self.budget).saturating_sub(self.used);
        if room == 0 {
            return false;
        }
        let mut price = self.tok.count(&render::item_block(self.format, &item)) + SEAM;
        if !self.open.contains(&item.kind) {
            price += self.tok.count(&render::heading(self.format, item.kind));
        }
        if price > room {
            return false;
        }
        self.used += price;
        self.open.insert(item.kind);
        self.kept.push((item, price));
        true
    }

    /// Returns P0, then kept P1 items in the order they were chosen, then
    /// kept P2 items in conversation order.
    fn in_order<'a>(&'a self, p0: &[&'a Item]) -> Vec<&'a Item> {
        let mut p2: Vec<&Item> = self
            .kept
            .iter()
            .map(|(i, _)| i)
            .filter(|i| i.priority == Priority::P2)
            .collect();
        p2.sort_by_key(|i| i.seqs.first().copied());
        let p1 = self
            .kept
            .iter()
            .map(|(i, _)| i)
            .filter(|i| i.priority == Priority::P1);
        p0.iter().copied().chain(p1).chain(p2).collect()
    }

    /// Returns the position of the item to give up first: the last P2 one
    /// added, else the last P1 one.
    fn least_important(&self) -> Option<usize> {
        let last_of = |p: Priority| self.kept.iter().rposition(|(i, _)| i.priority == p);
        last_of(Priority::P2).or_else(|| last_of(Priority::P1))
    }
}

/// Keeps extractive excerpts: user messages newest first (they carry the
/// intent), then assistant messages newest first, until P2 is full.
fn fill_excerpts(fill: &mut Fill, excerpts: &[Excerpt], dropped: &mut Vec<Dropped>) {
    let mut left_out = Vec::new();
    for role in ["user", "assistant"] {
        let mut misses = 0;
        for x in excerpts.iter().rev().filter(|x| x.role == role) {
            let item = Item {
                priority: Priority::P2,
                kind: ItemKind::Excerpt,
                label: format!("{}: {}", x.role, summarize::extract(x)),
                body: None,
                seqs: vec![x.seq],
            };
            let budget = fill.budget;
            if misses < MAX_MISSES && fill.try_add(item, budget) {
                misses = 0;
            } else {
                misses += 1;
                left_out.push(x.seq);
            }
        }
    }
    if !left_out.is_empty() {
        left_out.sort_unstable();
        dropped.push(Dropped {
            what: ItemKind::Excerpt.name().into(),
            priority: Some(Priority::P2),
            reason: DropReason::Budget,
            label: None,
            seqs: left_out,
        });
    }
}

/// Returns the newest excerpts whose texts total at most `max_chars`,
/// oldest first.
fn newest_within(excerpts: &[Excerpt], max_chars: usize) -> Vec<Excerpt> {
    let mut total = 0;
    let start = excerpts
        .iter()
        .rposition(|x| {
            total += x.text.len();
            total > max_chars
        })
        .map_or(0, |i| i + 1);
    excerpts[start..].to_vec()
}

fn cut(item: &Item) -> Dropped {
    Dropped {
        what: item.kind.name().into(),
        priority: Some(item.priority),
        reason: DropReason::Budget,
        label: Some(flat(&item.label, 120)),
        seqs: item.seqs.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarizer_input_keeps_the_newest_excerpts() {
        let x = |seq: u64, n: usize| Excerpt {
            seq,
            role: "user".into(),
            text: "a".repeat(n),
        };
        let all = [x(1, 50), x(2, 30), x(3, 30)];
        let seqs = |v: Vec<Excerpt>| v.iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(seqs(newest_within(&all, 60)), [2, 3]);
        assert_eq!(seqs(newest_within(&all, 1000)), [1, 2, 3]);
        assert!(newest_within(&all, 10).is_empty());
    }
}
