//! Waiting for agent stores to change (`git session watch`): one recursive
//! inotify (or the platform's) watch per store root through the `notify`
//! crate, no polling.
//!
//! Events are only a hint that something under a root changed; capture
//! then reads every source from its cursor, so coalesced or missed events
//! (a file written right after its directory was created, before the
//! watch on the new directory is in place) cost nothing: the next capture
//! walks the whole store again. SQLite sources change through their
//! `-wal` file, which is under the same root.
//!
//! A [`Stopper`] ends the wait from another thread (the watch's signal
//! thread): changes already gathered are returned first, then the watch
//! ends, so a stop never cuts a capture short.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher};

use super::{NativeError, NativeResult};

/// What the watcher's channel carries.
enum Message {
    /// A file event (or the backend's error).
    Change(notify::Result<notify::Event>),
    /// Stop, for the reason given.
    Stop(&'static str),
}

/// Watches store roots.
pub struct StoreWatcher {
    _watcher: notify::RecommendedWatcher,
    rx: Receiver<Message>,
    tx: Sender<Message>,
    roots: Vec<PathBuf>,
    /// Why the watch was asked to stop, once it was.
    stopped: Cell<Option<&'static str>>,
}

/// Ends a [`StoreWatcher`]'s wait from any thread.
#[derive(Clone)]
pub struct Stopper(Sender<Message>);

impl Stopper {
    /// Asks the watch to stop: [`StoreWatcher::next_change`] returns what
    /// it has gathered, then `None`.
    pub fn stop(&self, why: &'static str) {
        let _ = self.0.send(Message::Stop(why));
    }
}

impl StoreWatcher {
    /// Watches each root recursively; a root that does not exist is an error.
    pub fn new(roots: Vec<PathBuf>) -> NativeResult<StoreWatcher> {
        let (tx, rx) = channel();
        let events = tx.clone();
        let mut watcher = notify::recommended_watcher(move |e| {
            let _ = events.send(Message::Change(e));
        })
        .map_err(|e| watch_error(Path::new("."), e))?;
        for root in &roots {
            watcher
                .watch(root, RecursiveMode::Recursive)
                .map_err(|e| watch_error(root, e))?;
        }
        Ok(StoreWatcher {
            _watcher: watcher,
            rx,
            tx,
            roots,
            stopped: Cell::new(None),
        })
    }

    /// Returns a handle that stops this watcher's wait.
    pub fn stopper(&self) -> Stopper {
        Stopper(self.tx.clone())
    }

    /// Returns why the watch stopped, once a [`Stopper`] stopped it.
    pub fn stopped(&self) -> Option<&'static str> {
        self.stopped.get()
    }

    /// Blocks until a relevant change under a root, then gathers more until
    /// `quiet` passes without one (or `max_wait` since the first); returns
    /// the indexes of the roots that changed, or `None` when the watcher
    /// is gone or stopped (what was gathered before a stop comes first).
    /// `relevant(root index, path)` says which paths matter.
    pub fn next_change(
        &self,
        quiet: Duration,
        max_wait: Duration,
        relevant: &dyn Fn(usize, &Path, bool) -> bool,
    ) -> Option<BTreeSet<usize>> {
        if self.stopped.get().is_some() {
            return None;
        }
        let mut changed = BTreeSet::new();
        let mut first: Option<Instant> = None;
        loop {
            let message = match first {
                None => self.rx.recv().ok()?,
                Some(t) => {
                    let left = max_wait.saturating_sub(t.elapsed()).min(quiet);
                    match self.rx.recv_timeout(left) {
                        Ok(e) => e,
                        Err(RecvTimeoutError::Timeout) => return Some(changed),
                        Err(RecvTimeoutError::Disconnected) => return Some(changed),
                    }
                }
            };
            let event = match message {
                Message::Change(event) => event,
                Message::Stop(why) => {
                    self.stopped.set(Some(why));
                    return first.is_some().then_some(changed);
                }
            };
            let Ok(event) = event else {
                // The backend lost events (queue overflow): treat every
                // root as changed, capture reads from the cursors anyway.
                changed.extend(0..self.roots.len());
                first.get_or_insert_with(Instant::now);
                continue;
            };
            if matches!(event.kind, EventKind::Access(_)) {
                continue;
            }
            let is_dir_create = matches!(
                event.kind,
                EventKind::Create(notify::event::CreateKind::Folder)
            );
            for path in &event.paths {
                if let Some(i) = self.roots.iter().position(|r| path.starts_with(r))
                    && (is_dir_create || relevant(i, path, false))
                {
                    changed.insert(i);
                    first.get_or_insert_with(Instant::now);
                }
            }
        }
    }
}

fn watch_error(path: &Path, e: notify::Error) -> NativeError {
    NativeError::Source {
        path: path.to_owned(),
        message: format!("cannot watch: {e}"),
    }
}
