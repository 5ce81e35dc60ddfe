//! One event loop for a switch's control work — or for every switch of a group.
//!
//! Each control component (the admin socket, the FIB mirror, the adaptive-routing notifier, the
//! BMP station, the switch's own housekeeping) is a [`Source`]: it says which descriptors it
//! waits on ([`Source::interests`]) and when it next has work without one
//! ([`Source::deadline`]), and the loop calls it when a descriptor is ready
//! ([`Source::on_ready`]) or its deadline has come ([`Source::on_timer`]). A source never
//! blocks for long and never sleeps: what it waits for, it tells the loop. The same sources run
//! in a standalone `ofan-switch` (its one loop, on its main thread) and in `ofan-switch group`
//! (one loop, on one thread, for all members): the shape of Firecracker's `event-manager`, one
//! epoll per thread and every device a subscriber.
//!
//! Namespaces matter only when a socket is created: a group's member opens its sockets on a
//! thread in its namespace and then hands its sources to the shared loop ([`LoopHandle::add`]),
//! whose thread may be anywhere.
//!
//! The loop is level-triggered epoll (`sys::Epoll`) rather than `mio` or `polling`: a source
//! that reads one message and returns is called again while more are queued, which keeps every
//! source's handler a plain read-then-act (mio is edge-triggered: each handler would have to
//! drain its descriptor or lose its wake-up), and this crate already has its one `unsafe`
//! module for the three calls it needs. Timers are each source's deadline, found by a scan at
//! each turn: a group has tens to a few hundred sources, and a deadline changes with nearly
//! every call, which a heap would have to follow.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sys::Epoll;

/// What a source waits for on a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    /// Bytes (or a connection, or the peer's end) to read.
    Read,
    /// Room to write.
    Write,
}

impl Interest {
    const fn events(self) -> u32 {
        match self {
            Self::Read => libc::EPOLLIN as u32,
            Self::Write => libc::EPOLLOUT as u32,
        }
    }
}

/// A control component the loop drives.
///
/// The loop follows a source's descriptors by number: a source that closes a descriptor and
/// opens another in the same call may get the same number back, which the loop would take for
/// the old one (no longer watched: epoll forgets a descriptor when it closes). Open the new one
/// first, then close the old.
pub trait Source: Send {
    /// The descriptors it waits on now, with what for (asked again after every call).
    fn interests(&self, out: &mut Vec<(RawFd, Interest)>);
    /// `fd` is ready (or its peer hung up, or it has an error: the next read or write says).
    fn on_ready(&mut self, fd: RawFd, now: Instant);
    /// When it next has work without a descriptor becoming ready.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    /// Its deadline has come.
    fn on_timer(&mut self, _now: Instant) {}
}

/// Names a source in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceId(u64);

/// Requests to the loop from other threads.
enum Op {
    Add(
        SourceId,
        Box<dyn Source>,
        tracing::Span,
        Option<Arc<AtomicBool>>,
    ),
    /// Remove (and drop) the sources, then say so.
    Remove(Vec<SourceId>, mpsc::Sender<()>),
}

/// What a [`LoopHandle`] shares with its loop.
struct Inbox {
    ops: Mutex<Vec<Op>>,
    /// Written to wake the loop (the loop reads the other end).
    wake: UnixStream,
    /// Set when the loop is gone: requests are done at once (its sources were dropped).
    closed: AtomicBool,
    next_id: AtomicU64,
}

/// Adds sources to a running loop and removes them, from any thread (but removing from one of
/// the loop's own sources would wait for itself).
#[derive(Clone)]
pub struct LoopHandle {
    inbox: Arc<Inbox>,
}

impl std::fmt::Debug for LoopHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopHandle").finish_non_exhaustive()
    }
}

impl LoopHandle {
    /// Hands `source` to the loop, to be driven from its next turn on, within the current
    /// tracing span (a group's member's, so its sources log as that member).
    pub fn add(&self, source: Box<dyn Source>) -> SourceId {
        self.add_watched(source, None)
    }

    /// [`Self::add`]; if the source panics (and is dropped), `failed` is set.
    pub fn add_watched(
        &self,
        source: Box<dyn Source>,
        failed: Option<Arc<AtomicBool>>,
    ) -> SourceId {
        let id = SourceId(self.inbox.next_id.fetch_add(1, Ordering::Relaxed));
        if !self.inbox.closed.load(Ordering::Acquire) {
            let span = tracing::Span::current();
            lock(&self.inbox.ops).push(Op::Add(id, source, span, failed));
            self.wake();
        }
        id
    }

    /// Removes `ids` from the loop and drops them (closing their descriptors); returns once
    /// they are dropped, or at once when the loop is gone.
    pub fn remove(&self, ids: &[SourceId]) {
        if ids.is_empty() {
            return;
        }
        let (done, removed) = mpsc::channel();
        if self.inbox.closed.load(Ordering::Acquire) {
            return;
        }
        lock(&self.inbox.ops).push(Op::Remove(ids.to_vec(), done));
        self.wake();
        // Err: the loop ended (and dropped its sources) before it got to the request.
        let _ = removed.recv();
    }

    /// Wakes the loop (to look at a stop flag, say).
    pub fn wake(&self) {
        let _ = (&self.inbox.wake).write(&[1]);
    }

    /// A descriptor that wakes the loop when a byte is written to it (for a signal handler:
    /// `signal_hook::low_level::pipe::register`).
    ///
    /// # Errors
    /// The `dup` error.
    pub fn waker(&self) -> io::Result<UnixStream> {
        self.inbox.wake.try_clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Entry {
    source: Box<dyn Source>,
    span: tracing::Span,
    /// Set if the source panics.
    failed: Option<Arc<AtomicBool>>,
    /// What is registered now: descriptor, interest, token.
    registered: Vec<(RawFd, Interest, u64)>,
}

/// The token of the loop's own wake-up socket.
const WAKE: u64 = 0;

/// The loop: owns its sources and calls them on one thread ([`Self::run_until`]).
pub struct EventLoop {
    epoll: Epoll,
    inbox: Arc<Inbox>,
    wake: UnixStream,
    sources: BTreeMap<SourceId, Entry>,
    tokens: HashMap<u64, (SourceId, RawFd)>,
    next_token: u64,
    ready: Vec<(u64, u32)>,
    scratch: Vec<(RawFd, Interest)>,
}

impl std::fmt::Debug for EventLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLoop")
            .field("sources", &self.sources.len())
            .finish_non_exhaustive()
    }
}

impl EventLoop {
    /// A loop without sources.
    ///
    /// # Errors
    /// When epoll or the wake-up socket cannot be created.
    pub fn new() -> io::Result<Self> {
        let epoll = Epoll::new()?;
        let (wake, wake_write) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        wake_write.set_nonblocking(true)?;
        epoll.control(wake.as_raw_fd(), Interest::Read.events(), WAKE, false)?;
        Ok(Self {
            epoll,
            inbox: Arc::new(Inbox {
                ops: Mutex::new(Vec::new()),
                wake: wake_write,
                closed: AtomicBool::new(false),
                next_id: AtomicU64::new(0),
            }),
            wake,
            sources: BTreeMap::new(),
            tokens: HashMap::new(),
            next_token: WAKE + 1,
            ready: Vec::with_capacity(64),
            scratch: Vec::new(),
        })
    }

    /// A handle to add and remove sources from other threads (or before the loop runs).
    #[must_use]
    pub fn handle(&self) -> LoopHandle {
        LoopHandle {
            inbox: Arc::clone(&self.inbox),
        }
    }

    /// How many sources it drives.
    #[must_use]
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// Whether it drives none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Runs turns until `done` says so (asked after each turn: a wake-up — [`LoopHandle::wake`]
    /// — makes one).
    ///
    /// # Errors
    /// An epoll error.
    pub fn run_until(&mut self, done: impl Fn() -> bool) -> io::Result<()> {
        while !done() {
            self.turn(None)?;
        }
        Ok(())
    }

    /// One turn: takes the handles' requests, waits (at most `max_wait`, and no later than the
    /// earliest deadline) for a descriptor, calls the ready sources, then those whose deadline
    /// has come.
    ///
    /// # Errors
    /// An epoll error.
    pub fn turn(&mut self, max_wait: Option<Duration>) -> io::Result<()> {
        self.take_ops();
        let now = Instant::now();
        let next = self
            .sources
            .values()
            .filter_map(|entry| entry.source.deadline())
            .min();
        let wait = match (next.map(|at| at.saturating_duration_since(now)), max_wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut ready = std::mem::take(&mut self.ready);
        self.epoll.wait(&mut ready, wait)?;
        let now = Instant::now();
        for &(token, _) in &ready {
            if token == WAKE {
                let mut sink = [0u8; 64];
                while matches!((&self.wake).read(&mut sink), Ok(n) if n > 0) {}
                continue;
            }
            // A token a source dropped earlier in this turn is gone.
            let Some(&(id, fd)) = self.tokens.get(&token) else {
                continue;
            };
            self.call(id, |source| source.on_ready(fd, now));
        }
        self.ready = ready;
        // The clock is read after each deadline: a source whose deadline is "now" is due.
        let due: Vec<SourceId> = self
            .sources
            .iter()
            .filter(|(_, entry)| {
                entry
                    .source
                    .deadline()
                    .is_some_and(|at| at <= Instant::now())
            })
            .map(|(&id, _)| id)
            .collect();
        let now = Instant::now();
        for id in due {
            self.call(id, |source| source.on_timer(now));
        }
        Ok(())
    }

    /// Calls source `id` (within its span), then follows its descriptors. A source that
    /// panics is dropped, and the loop goes on with the others: in a group, one member's
    /// control bug must not stop every member's.
    fn call(&mut self, id: SourceId, call: impl FnOnce(&mut dyn Source)) {
        let Some(entry) = self.sources.get_mut(&id) else {
            return;
        };
        let panicked = {
            let _entered = entry.span.enter();
            let source = &mut *entry.source;
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(source))).is_err()
        };
        if panicked {
            let _entered = entry.span.clone().entered();
            tracing::error!("a control source panicked: it is dropped, the others go on");
            if let Some(failed) = &entry.failed {
                failed.store(true, Ordering::Relaxed);
            }
            self.drop_source(id);
            return;
        }
        self.sync(id);
    }

    fn take_ops(&mut self) {
        let ops = std::mem::take(&mut *lock(&self.inbox.ops));
        for op in ops {
            match op {
                Op::Add(id, source, span, failed) => {
                    self.sources.insert(
                        id,
                        Entry {
                            source,
                            span,
                            failed,
                            registered: Vec::new(),
                        },
                    );
                    self.sync(id);
                }
                Op::Remove(ids, done) => {
                    for id in ids {
                        self.drop_source(id);
                    }
                    let _ = done.send(());
                }
            }
        }
    }

    fn drop_source(&mut self, id: SourceId) {
        let Some(entry) = self.sources.remove(&id) else {
            return;
        };
        // Unregistered while its descriptors are still open (they close with it).
        for &(fd, _, token) in &entry.registered {
            let _ = self.epoll.delete(fd);
            self.tokens.remove(&token);
        }
        let _entered = entry.span.enter();
        drop(entry.source);
    }

    /// Makes the registrations of source `id` what it asks for now. A descriptor it closed in
    /// its last call left epoll with its close (the delete fails, harmlessly).
    fn sync(&mut self, id: SourceId) {
        let Some(entry) = self.sources.get_mut(&id) else {
            return;
        };
        let mut wanted = std::mem::take(&mut self.scratch);
        wanted.clear();
        entry.source.interests(&mut wanted);
        let mut kept = Vec::with_capacity(wanted.len());
        for (fd, interest, token) in entry.registered.drain(..) {
            match wanted.iter().position(|&(w, _)| w == fd) {
                Some(at) => {
                    let (_, now) = wanted.swap_remove(at);
                    if now != interest && self.epoll.control(fd, now.events(), token, true).is_err()
                    {
                        self.tokens.remove(&token);
                        continue;
                    }
                    kept.push((fd, now, token));
                }
                None => {
                    let _ = self.epoll.delete(fd);
                    self.tokens.remove(&token);
                }
            }
        }
        for (fd, interest) in wanted.drain(..) {
            let token = self.next_token;
            self.next_token += 1;
            match self.epoll.control(fd, interest.events(), token, false) {
                Ok(()) => {
                    self.tokens.insert(token, (id, fd));
                    kept.push((fd, interest, token));
                }
                Err(error) => {
                    let _entered = entry.span.enter();
                    tracing::warn!(fd, %error, "control loop: cannot watch a descriptor");
                }
            }
        }
        entry.registered = kept;
        self.scratch = wanted;
    }
}

impl Drop for EventLoop {
    fn drop(&mut self) {
        self.inbox.closed.store(true, Ordering::Release);
        // Requests made since the last turn: their senders drop, their waiters return.
        drop(std::mem::take(&mut *lock(&self.inbox.ops)));
        let ids: Vec<SourceId> = self.sources.keys().copied().collect();
        for id in ids {
            self.drop_source(id);
        }
    }
}

/// Waits up to `timeout` until one of `fds` is readable (or hung up), for a thread that waits
/// on a socket or two of its own rather than joining a loop (the group's control socket);
/// returns which are.
///
/// # Errors
/// The `poll` error.
pub fn wait_readable(fds: &[RawFd], timeout: Duration) -> io::Result<Vec<bool>> {
    crate::sys::poll_readable(fds, timeout)
}

/// Drives `source` on a thread of its own named `name` until `stop` is set (looked at after
/// each call of the source, and at least every `check`).
///
/// # Errors
/// When the loop or the thread cannot be created.
pub fn spawn(
    name: &str,
    source: Box<dyn Source>,
    stop: Arc<AtomicBool>,
    check: Duration,
) -> io::Result<std::thread::JoinHandle<()>> {
    let mut event_loop = EventLoop::new()?;
    event_loop.handle().add(source);
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Err(error) = event_loop.turn(Some(check)) {
                    tracing::error!(%error, "control loop failed");
                    break;
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the bytes of one socket and ticks every 10 ms.
    struct Counter {
        socket: UnixStream,
        bytes: Arc<AtomicU64>,
        ticks: Arc<AtomicU64>,
        next: Instant,
    }

    impl Source for Counter {
        fn interests(&self, out: &mut Vec<(RawFd, Interest)>) {
            out.push((self.socket.as_raw_fd(), Interest::Read));
        }
        fn on_ready(&mut self, _fd: RawFd, _now: Instant) {
            // One byte per call: level-triggered, the loop calls again while more are queued.
            let mut byte = [0u8; 1];
            if matches!((&self.socket).read(&mut byte), Ok(1)) {
                self.bytes.fetch_add(1, Ordering::Relaxed);
            }
        }
        fn deadline(&self) -> Option<Instant> {
            Some(self.next)
        }
        fn on_timer(&mut self, now: Instant) {
            self.ticks.fetch_add(1, Ordering::Relaxed);
            self.next = now + Duration::from_millis(10);
        }
    }

    /// Panics at its first deadline.
    struct Faulty;

    impl Source for Faulty {
        fn interests(&self, _out: &mut Vec<(RawFd, Interest)>) {}
        fn on_ready(&mut self, _fd: RawFd, _now: Instant) {}
        fn deadline(&self) -> Option<Instant> {
            Some(Instant::now())
        }
        fn on_timer(&mut self, _now: Instant) {
            panic!("a bug in one source");
        }
    }

    #[test]
    fn a_source_that_panics_is_dropped_and_the_others_go_on() {
        let mut event_loop = EventLoop::new().unwrap();
        let handle = event_loop.handle();
        let (ours, _theirs) = UnixStream::pair().unwrap();
        let ticks = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicBool::new(false));
        handle.add_watched(Box::new(Faulty), Some(Arc::clone(&failed)));
        handle.add(Box::new(Counter {
            socket: ours,
            bytes: Arc::new(AtomicU64::new(0)),
            ticks: Arc::clone(&ticks),
            next: Instant::now(),
        }));
        for _ in 0..5 {
            event_loop.turn(Some(Duration::from_millis(20))).unwrap();
        }
        assert_eq!(event_loop.len(), 1, "the faulty source is gone");
        assert!(failed.load(Ordering::Relaxed), "and its owner is told");
        assert!(
            ticks.load(Ordering::Relaxed) >= 1,
            "the other one still runs"
        );
    }

    #[test]
    fn sources_are_called_for_bytes_and_deadlines_and_removed_on_request() {
        let mut event_loop = EventLoop::new().unwrap();
        let handle = event_loop.handle();
        let (ours, theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let (bytes, ticks) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let id = handle.add(Box::new(Counter {
            socket: ours,
            bytes: Arc::clone(&bytes),
            ticks: Arc::clone(&ticks),
            next: Instant::now() + Duration::from_millis(10),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                event_loop
                    .run_until(|| stop.load(Ordering::Relaxed))
                    .unwrap();
                event_loop
            })
        };
        (&theirs).write_all(b"hello").unwrap();
        let start = Instant::now();
        while bytes.load(Ordering::Relaxed) < 5 && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            bytes.load(Ordering::Relaxed),
            5,
            "every byte, one call each"
        );
        std::thread::sleep(Duration::from_millis(100));
        let ticked = ticks.load(Ordering::Relaxed);
        assert!((3..=12).contains(&ticked), "{ticked} ticks in ~100 ms");
        handle.remove(&[id]);
        // Removed means dropped: its end of the pair is closed.
        let mut byte = [0u8; 1];
        assert_eq!((&theirs).read(&mut byte).unwrap(), 0);
        let after = ticks.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            ticks.load(Ordering::Relaxed),
            after,
            "no calls once removed"
        );
        stop.store(true, Ordering::Relaxed);
        handle.wake();
        let event_loop = thread.join().unwrap();
        assert!(event_loop.is_empty());
        drop(event_loop);
        // A loop that is gone answers at once.
        handle.remove(&[id]);
    }
}
