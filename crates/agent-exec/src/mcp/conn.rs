//! One MCP connection: the JSON-RPC lifecycle, the requests in flight, and the three threads
//! that keep a slow, broken or vanished client from costing more than a bounded amount.
//!
//! # Shape
//!
//! ```text
//!  input ──▶ reader thread ──(1 message)──▶ dispatcher (async) ──▶ writer thread ──▶ output
//!            frames + parses                 lifecycle, ids,        one reply line
//!            (wire.rs)                       calls as tasks         at a time
//!                                                 ▲
//!            hang-up watch (stdout only) ─────────┘
//! ```
//!
//! - **Exactly one reply per request.** The dispatcher answers every request itself or through
//!   a call task it spawned, and only it removes a request from the in-flight table — *before*
//!   queueing the reply, so a client that reuses an id after reading its reply never meets a
//!   stale entry. A request whose id is already in flight is answered with `-32600` and runs
//!   nothing; the first keeps running and gets its own reply. A call task that panicked is
//!   answered with `-32603`. The one exception is MCP's: a request the client cancelled
//!   (`notifications/cancelled`) gets no reply — its call is stopped, and its id stays in flight
//!   until the stop is complete.
//! - **Backpressure.** Replies go to the writer thread through a queue whose size in bytes is
//!   counted; while it holds more than [`MAX_QUEUED_REPLY_BYTES`], the dispatcher reads no
//!   further message, the reader thread blocks handing one over, and the client's writes block
//!   on the full pipe. Calls already running still finish and queue their replies, so memory is
//!   bounded by that figure plus [`MAX_IN_FLIGHT`] replies (each bounded by the tools' own
//!   output caps, RUN-9, CMD-5), whatever the client sends.
//! - **Requests in flight.** At most [`MAX_IN_FLIGHT`] `tools/call` run at once per connection:
//!   the per-turn budget of TS-2, so a whole agent turn fits. One more is answered at once with
//!   `-32000` ("server busy", naming the limit) and runs nothing.
//! - **End of input** (the client closed our stdin, MCP's way of ending a session): nothing
//!   more is read; every request already read — a final line without `\n` included — is still
//!   served and answered; then the server returns. A client that wants running calls stopped
//!   cancels them, closes our stdout too, or signals us.
//! - **Hang-up** (our output is gone: a write fails, or for stdio the pipe reports that its
//!   reader closed, noticed even while nothing is written): nobody can read a reply, so no
//!   further message is read or started, every call in flight is cancelled — its process tree
//!   stopped (RUN-10, CMD-6) — and the server returns once they have all ended
//!   (invariant 4: nothing outlives a call).
//! - **The server's own requests** ([`Requester`]: `elicitation/create`). MCP lets a
//!   server ask the client during a call. Such a request goes out through the same queue as
//!   the replies, with an id of its own (`agent-exec-<n>`, never one the client uses for its
//!   requests: the two directions have separate id spaces anyway); the client's response is
//!   read by the dispatcher like any message and handed to the request waiting for that id
//!   (one with an id nothing waits for is dropped). A request is only sent when the client
//!   declared the capability in `initialize`; otherwise it fails at once
//!   ([`RequestError::NotSupported`]). A waiting request whose call is cancelled (the future
//!   dropped) is withdrawn with `notifications/cancelled` to the client; at end of input or
//!   hang-up every waiting request fails ([`RequestError::Closed`]), so no call waits for an
//!   answer that cannot come.
//! - **The server's notifications** ([`Notifier`]: `notifications/message`, MCP logging, for
//!   `background_command`'s events). They go out through the same counted queue as the replies,
//!   so the backpressure bound covers them too, but they are never allowed to *grow* it: a
//!   notice is only queued while the queue holds at most [`MAX_QUEUED_REPLY_BYTES`]
//!   ([`Pushed::Full`] otherwise — the sender holds or drops it, see `mcp.rs`), only after the
//!   `initialize` result went out (MCP: nothing but pings and logs before it, and no log
//!   before the client knows the capability), and never after a hang-up. The client's
//!   `logging/setLevel` is answered here (for a service with a notifier) and sets the lowest
//!   level sent; below it a notice is [`Pushed::Filtered`].

use std::collections::HashMap;
use std::future::Future;
use std::io::{self, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value, json};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinSet;

use super::wire::{self, Frame, Id, Incoming, LineReader, Refusal, code, kind};

/// The most `tools/call` requests one connection runs at once: TS-2's per-turn budget.
pub const MAX_IN_FLIGHT: usize = 32;

/// Above this many bytes of replies waiting for the client to read them, no further message is
/// read.
pub const MAX_QUEUED_REPLY_BYTES: usize = 4 * 1024 * 1024;

/// The protocol versions this server speaks: every MCP revision with an `initialize`
/// handshake. A client asking for another gets the newest (the spec's rule).
pub const PROTOCOL_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// A `tools/call` in progress: resolves to the `CallToolResult` object.
pub type CallFuture = Pin<Box<dyn Future<Output = Value> + Send>>;

/// Why a request of the server to the client got no result.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestError {
    /// The client did not declare the capability in `initialize` (or was not initialized):
    /// nothing was sent.
    NotSupported,
    /// The connection ended (end of input, hang-up) before an answer came, or had ended.
    Closed,
    /// The client answered with a JSON-RPC error (the `error` object).
    Refused(Value),
}

/// The server's side of its own requests to the client on one connection (module docs):
/// cheap to clone; a clone made before [`serve`] starts is attached to it by the service's
/// [`Service::requester`].
#[derive(Clone, Debug, Default)]
pub struct Requester {
    link: Arc<std::sync::Mutex<Link>>,
}

#[derive(Debug, Default)]
struct Link {
    /// Where requests go; `None` before the connection starts and after it ended.
    outbox: Option<Outbox>,
    /// The client declared `elicitation` (form mode) in `initialize`.
    elicitation: bool,
    /// End of input or hang-up: no answer can come any more.
    closed: bool,
    next: u64,
    pending: HashMap<Id, tokio::sync::oneshot::Sender<Result<Value, Value>>>,
}

impl Requester {
    /// A requester not attached to any connection yet (every request fails `Closed`).
    pub fn new() -> Requester {
        Requester::default()
    }

    fn link(&self) -> std::sync::MutexGuard<'_, Link> {
        self.link
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends `elicitation/create` with `params` and waits for the client's result. Dropping
    /// the future withdraws the request (`notifications/cancelled` to the client).
    pub async fn elicit(&self, params: Value) -> Result<Value, RequestError> {
        let (id, answer) = {
            let mut link = self.link();
            if !link.elicitation {
                return Err(RequestError::NotSupported);
            }
            let Some(outbox) = link.outbox.clone().filter(|_| !link.closed) else {
                return Err(RequestError::Closed);
            };
            link.next += 1;
            let id = Id::Str(format!("agent-exec-{}", link.next));
            let (tx, rx) = tokio::sync::oneshot::channel();
            link.pending.insert(id.clone(), tx);
            outbox.push(wire::request_line(&id, "elicitation/create", params));
            (id, rx)
        };
        let mut waiting = Waiting {
            requester: self,
            id: Some(id),
        };
        let outcome = answer.await;
        waiting.id = None;
        match outcome {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(RequestError::Refused(error)),
            Err(_) => Err(RequestError::Closed),
        }
    }

    /// Connects to a connection's outbox.
    fn attach(&self, outbox: Outbox) {
        let mut link = self.link();
        link.outbox = Some(outbox);
        link.closed = false;
    }

    fn set_elicitation(&self, declared: bool) {
        self.link().elicitation = declared;
    }

    /// Hands the client's response to the request waiting for `id`; false when none waits.
    fn resolve(&self, id: &Id, outcome: Result<Value, Value>) -> bool {
        match self.link().pending.remove(id) {
            Some(tx) => tx.send(outcome).is_ok(),
            None => false,
        }
    }

    /// No answer can come any more: every waiting request fails, new ones fail at once.
    fn close(&self) {
        let mut link = self.link();
        link.closed = true;
        link.pending.clear();
    }

    /// The connection is over: also lets go of its outbox (the writer ends when every sender
    /// is gone).
    fn detach(&self) {
        let mut link = self.link();
        link.closed = true;
        link.pending.clear();
        link.outbox = None;
    }
}

/// A request still waiting for its answer; dropped while waiting, it is withdrawn.
struct Waiting<'a> {
    requester: &'a Requester,
    id: Option<Id>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let mut link = self.requester.link();
        if link.pending.remove(&id).is_none() || link.closed {
            return;
        }
        if let Some(outbox) = &link.outbox {
            outbox.push(wire::notification_line(
                "notifications/cancelled",
                json!({
                    "requestId": id.to_value(),
                    "reason": "the tool call that asked was cancelled",
                }),
            ));
        }
    }
}

/// An MCP logging level (the syslog severities of RFC 5424), least severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warning`
    Warning,
    /// `error`
    Error,
    /// `critical`
    Critical,
    /// `alert`
    Alert,
    /// `emergency`
    Emergency,
}

impl Level {
    /// Every level, least severe first.
    pub const ALL: [Level; 8] = [
        Level::Debug,
        Level::Info,
        Level::Notice,
        Level::Warning,
        Level::Error,
        Level::Critical,
        Level::Alert,
        Level::Emergency,
    ];

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Notice => "notice",
            Level::Warning => "warning",
            Level::Error => "error",
            Level::Critical => "critical",
            Level::Alert => "alert",
            Level::Emergency => "emergency",
        }
    }

    /// The level named `name` exactly (the spec's lowercase names).
    pub fn from_name(name: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.as_str() == name)
    }
}

/// One `notifications/message`, serialised once: its level decides whether it is sent
/// ([`Pushed::Filtered`]), its size counts against the queue's bound.
#[derive(Clone, Debug)]
pub struct Notice {
    level: Level,
    line: Vec<u8>,
}

impl Notice {
    /// A log message at `level` from `logger` carrying `data` (any JSON, sent as is).
    pub fn log(level: Level, logger: &str, data: Value) -> Notice {
        Notice {
            level,
            line: wire::notification_line(
                "notifications/message",
                json!({"level": level.as_str(), "logger": logger, "data": data}),
            ),
        }
    }

    /// Its size on the wire, in bytes (the newline included).
    pub fn len(&self) -> usize {
        self.line.len()
    }
}

/// What became of a notice given to [`Notifier::push`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Queued for the client.
    Sent,
    /// Below the level the client set with `logging/setLevel`: not sent, by its wish.
    Filtered,
    /// More than [`MAX_QUEUED_REPLY_BYTES`] wait for the client (it does not read), or the
    /// client is not initialized yet: nothing was queued; try again later.
    Full,
    /// The connection has hung up or ended: nothing can be sent any more.
    Closed,
}

/// The server's notifications to the client on one connection (module docs): cheap to clone;
/// a clone made before [`serve`] starts is attached to it by the service's
/// [`Service::notifier`].
#[derive(Clone, Debug, Default)]
pub struct Notifier {
    link: Arc<std::sync::Mutex<NoticeLink>>,
}

#[derive(Debug)]
struct NoticeLink {
    outbox: Option<Outbox>,
    /// The `initialize` result is queued: notices may follow it.
    initialized: bool,
    /// Hung up or ended.
    closed: bool,
    /// The lowest level sent (`logging/setLevel`); everything until the client sets one.
    min: Level,
}

impl Default for NoticeLink {
    fn default() -> Self {
        NoticeLink {
            outbox: None,
            initialized: false,
            closed: false,
            min: Level::Debug,
        }
    }
}

impl Notifier {
    /// A notifier not attached to any connection yet (every notice is [`Pushed::Full`] until
    /// its connection is initialized).
    pub fn new() -> Notifier {
        Notifier::default()
    }

    fn link(&self) -> std::sync::MutexGuard<'_, NoticeLink> {
        self.link
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `notice` if the client wants its level and the queue has room (see [`Pushed`]).
    pub fn push(&self, notice: &Notice) -> Pushed {
        let link = self.link();
        if link.closed {
            return Pushed::Closed;
        }
        let Some(outbox) = link.outbox.as_ref().filter(|_| link.initialized) else {
            return Pushed::Full;
        };
        if notice.level < link.min {
            return Pushed::Filtered;
        }
        if outbox.queued() > MAX_QUEUED_REPLY_BYTES {
            return Pushed::Full;
        }
        outbox.push(notice.line.clone());
        Pushed::Sent
    }

    fn attach(&self, outbox: Outbox) {
        let mut link = self.link();
        link.outbox = Some(outbox);
        link.closed = false;
        link.initialized = false;
    }

    fn set_initialized(&self) {
        self.link().initialized = true;
    }

    fn set_level(&self, level: Level) {
        self.link().min = level;
    }

    /// Nothing can be sent any more; lets go of the outbox (the writer ends when every sender
    /// is gone).
    fn detach(&self) {
        let mut link = self.link();
        link.closed = true;
        link.outbox = None;
    }
}

/// The MCP methods a connection serves, behind the lifecycle and the limits.
pub trait Service: Send + Sync + 'static {
    /// The `initialize` result, for the negotiated `protocol_version`.
    fn initialize(&self, protocol_version: &str) -> Value;
    /// The `tools/list` result.
    fn list_tools(&self) -> Value;
    /// Starts one `tools/call` of tool `name`; `Err` (nothing started) is the invalid-params
    /// message. The future must end soon after `cancel` fires, with its work stopped.
    fn call(
        &self,
        id: &Id,
        name: &str,
        arguments: Map<String, Value>,
        cancel: Cancel,
    ) -> Result<CallFuture, String>;
    /// The requester the service's calls use to ask the client (attached to the connection
    /// for its lifetime); `None` for a service that never asks.
    fn requester(&self) -> Option<Requester> {
        None
    }
    /// The notifier the service's notices go through (attached to the connection for its
    /// lifetime); `None` for a service that sends none — then `logging/setLevel` is an unknown
    /// method. A service with one should declare the `logging` capability in
    /// [`Service::initialize`].
    fn notifier(&self) -> Option<Notifier> {
        None
    }
}

/// Fires when the client cancelled a call or hung up.
#[derive(Clone, Debug)]
pub struct Cancel(watch::Receiver<bool>);

impl Cancel {
    /// Resolves once the call is cancelled.
    pub async fn cancelled(&mut self) {
        // The sender lives in the in-flight table until the call ended; if it is gone the
        // connection is gone, which cancels too.
        let _ = self.0.wait_for(|c| *c).await;
    }
}

/// How a connection ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The client closed our input; everything read was answered.
    InputClosed,
    /// Our output went away; this many calls in flight were stopped.
    HungUp {
        /// Calls cancelled because of the hang-up.
        stopped: usize,
    },
}

enum Event {
    Message(Incoming),
    /// End of input, or the error that ended it.
    End(Option<io::Error>),
}

/// Replies on their way to the writer thread, counted in bytes.
#[derive(Clone, Debug)]
struct Outbox {
    tx: std::sync::mpsc::Sender<Vec<u8>>,
    queued: Arc<AtomicUsize>,
}

impl Outbox {
    fn push(&self, line: Vec<u8>) {
        self.queued.fetch_add(line.len(), Ordering::SeqCst);
        let len = line.len();
        if self.tx.send(line).is_err() {
            // The writer is gone (hung up): the reply has nowhere to go.
            self.queued.fetch_sub(len, Ordering::SeqCst);
        }
    }

    fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }
}

struct Flight {
    cancel: watch::Sender<bool>,
    /// Cancelled by the client or by the hang-up: its result is not sent.
    cancelled: bool,
}

/// Serves one connection on `input` and `output` until the client closes the input (after
/// every request read is answered) or the output goes away. `watch` is a descriptor of the
/// output polled for the hang-up of its reader (for a pipe or socket), if the caller has one.
pub async fn serve<S: Service>(
    service: Arc<S>,
    input: impl Read + Send + 'static,
    output: impl Write + Send + 'static,
    watch: Option<OwnedFd>,
) -> io::Result<End> {
    let (hangup_tx, mut hangup) = watch::channel(false);
    let hangup_tx = Arc::new(hangup_tx);
    let drained = Arc::new(Notify::new());
    let queued = Arc::new(AtomicUsize::new(0));
    let (messages_tx, mut messages) = mpsc::channel(1);
    spawn_reader(input, messages_tx)?;
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let writer = spawn_writer(
        output,
        rx,
        Arc::clone(&queued),
        Arc::clone(&drained),
        Arc::clone(&hangup_tx),
    )?;
    if let Some(fd) = watch {
        spawn_hangup_watch(fd, Arc::clone(&hangup_tx))?;
    }
    let outbox = Outbox { tx, queued };
    let requester = service.requester();
    if let Some(r) = &requester {
        r.attach(outbox.clone());
    }
    let notifier = service.notifier();
    if let Some(n) = &notifier {
        n.attach(outbox.clone());
    }
    let mut conn = Conn {
        service,
        requester: requester.clone(),
        notifier: notifier.clone(),
        outbox,
        flights: HashMap::new(),
        tasks: JoinSet::new(),
        task_ids: HashMap::new(),
        initialized: false,
    };
    let mut input_open = true;
    let mut read_error = None;
    let mut stopped = None;
    loop {
        if (!input_open || stopped.is_some()) && conn.tasks.is_empty() {
            break;
        }
        let accepting =
            input_open && stopped.is_none() && conn.outbox.queued() <= MAX_QUEUED_REPLY_BYTES;
        tokio::select! {
            biased;
            _ = hangup.wait_for(|h| *h), if stopped.is_none() => {
                stopped = Some(conn.cancel_all());
                if let Some(r) = &requester {
                    r.close();
                }
                if let Some(n) = &notifier {
                    n.detach();
                }
            }
            Some(done) = conn.tasks.join_next_with_id(), if !conn.tasks.is_empty() => {
                conn.finished(done, stopped.is_some());
            }
            () = drained.notified(), if !accepting && input_open && stopped.is_none() => {}
            event = messages.recv(), if accepting => match event {
                Some(Event::Message(m)) => conn.handle(m),
                Some(Event::End(e)) => {
                    input_open = false;
                    read_error = e;
                    // No answer to a request of ours can come any more.
                    if let Some(r) = &requester {
                        r.close();
                    }
                }
                None => {
                    input_open = false;
                    if let Some(r) = &requester {
                        r.close();
                    }
                }
            },
            else => break,
        }
    }
    // Every reply is queued; the writer ends once it has written them (or failed to) and every
    // sender is gone — the requester's too.
    if let Some(r) = &requester {
        r.detach();
    }
    if let Some(n) = &notifier {
        n.detach();
    }
    drop(conn);
    let _ = writer.join();
    match (stopped, read_error) {
        (Some(stopped), _) => Ok(End::HungUp { stopped }),
        (None, Some(e)) => Err(e),
        (None, None) => Ok(End::InputClosed),
    }
}

fn spawn_reader(input: impl Read + Send + 'static, tx: mpsc::Sender<Event>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("mcp-reader".into())
        .spawn(move || {
            let mut lines = LineReader::new(BufReader::new(input), wire::MAX_LINE_BYTES);
            loop {
                // Parsed here, off the runtime, so a 16 MiB line does not stall running calls.
                let event = match lines.next_frame() {
                    Ok(Some(Frame::Line(line))) => Event::Message(wire::parse(&line)),
                    Ok(Some(Frame::TooLong(prefix))) => {
                        Event::Message(Incoming::Refused(wire::too_long(&prefix)))
                    }
                    Ok(None) => Event::End(None),
                    Err(e) => Event::End(Some(e)),
                };
                let last = matches!(event, Event::End(_));
                // Blocks while the dispatcher is not reading: that is the backpressure.
                if tx.blocking_send(event).is_err() || last {
                    return;
                }
            }
        })
        .map(drop)
}

fn spawn_writer(
    mut output: impl Write + Send + 'static,
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    queued: Arc<AtomicUsize>,
    drained: Arc<Notify>,
    hangup: Arc<watch::Sender<bool>>,
) -> io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("mcp-writer".into())
        .spawn(move || {
            while let Ok(line) = rx.recv() {
                let written = output.write_all(&line).and_then(|()| output.flush());
                queued.fetch_sub(line.len(), Ordering::SeqCst);
                drained.notify_one();
                if written.is_err() {
                    // EPIPE (the client closed its end) or any other failure: no reply can
                    // reach the client any more.
                    hangup.send_replace(true);
                    return;
                }
            }
        })
}

/// Waits for the reader of `fd` to go away: a pipe reports `POLLERR` on its write end once its
/// read end is closed, a socket or terminal `POLLHUP`. Asking for no event at all makes `poll`
/// wait for exactly those (regular files never report them: it waits forever, harmlessly).
fn spawn_hangup_watch(fd: OwnedFd, hangup: Arc<watch::Sender<bool>>) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    std::thread::Builder::new()
        .name("mcp-hangup".into())
        .spawn(move || {
            loop {
                let mut fds = [PollFd::new(&fd, PollFlags::empty())];
                match poll(&mut fds, None) {
                    Ok(_) => {
                        let gone = PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL;
                        if fds[0].revents().intersects(gone) {
                            hangup.send_replace(true);
                            return;
                        }
                        // Nothing we asked for; do not spin on a descriptor that says so.
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => return,
                }
            }
        })
        .map(drop)
}

/// True when the client's `capabilities` declare form-mode elicitation: an `elicitation`
/// object that is empty (before 2025-11-25, and its shorthand since) or names `form`. A
/// client that declares only `url` mode cannot answer a form.
fn declares_form_elicitation(capabilities: Option<&Value>) -> bool {
    match capabilities.and_then(|c| c.get("elicitation")) {
        Some(Value::Object(e)) => e.is_empty() || e.get("form").is_some_and(Value::is_object),
        _ => false,
    }
}

struct Conn<S> {
    service: Arc<S>,
    requester: Option<Requester>,
    notifier: Option<Notifier>,
    outbox: Outbox,
    flights: HashMap<Id, Flight>,
    tasks: JoinSet<Value>,
    task_ids: HashMap<tokio::task::Id, Id>,
    initialized: bool,
}

fn invalid_params(id: &Id, message: impl std::fmt::Display) -> Refusal {
    Refusal {
        id: Some(id.to_value()),
        code: code::INVALID_PARAMS,
        message: format!("Invalid params: {message}"),
    }
}

/// The params object of a request, or why not. `None` and `null` are "no params".
fn params_object(
    id: &Id,
    method: &str,
    params: Option<Value>,
    shape: &str,
) -> Result<Option<Map<String, Value>>, Refusal> {
    match params {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(p)) => Ok(Some(p)),
        Some(other) => Err(invalid_params(
            id,
            format!(
                "{method} params must be an object {shape}, not {}",
                kind(&other)
            ),
        )),
    }
}

/// Member `field` of `params` as a string.
fn string_field(
    id: &Id,
    method: &str,
    params: &Map<String, Value>,
    field: &str,
    what: &str,
) -> Result<String, Refusal> {
    match params.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        None => Err(invalid_params(
            id,
            format!("{method} params.{field} is missing; give {what}"),
        )),
        Some(other) => Err(invalid_params(
            id,
            format!(
                "{method} params.{field} must be a string ({what}), not {}",
                kind(other)
            ),
        )),
    }
}

impl<S: Service> Conn<S> {
    fn refuse(&self, refusal: &Refusal) {
        self.outbox.push(wire::error_line(refusal));
    }

    fn reply(&self, id: &Id, result: Value) {
        self.outbox.push(wire::result_line(id, result));
    }

    fn cancel_all(&mut self) -> usize {
        for flight in self.flights.values_mut() {
            flight.cancelled = true;
            flight.cancel.send_replace(true);
        }
        self.flights.len()
    }

    fn finished(
        &mut self,
        done: Result<(tokio::task::Id, Value), tokio::task::JoinError>,
        hung_up: bool,
    ) {
        let (task, result) = match done {
            Ok((task, result)) => (task, Ok(result)),
            Err(e) => (e.id(), Err(())),
        };
        let Some(id) = self.task_ids.remove(&task) else {
            return;
        };
        // Out of the table before the reply is visible (see the module docs).
        let Some(flight) = self.flights.remove(&id) else {
            return;
        };
        if flight.cancelled || hung_up {
            return;
        }
        match result {
            Ok(result) => self.reply(&id, result),
            Err(()) => self.refuse(&Refusal {
                id: Some(id.to_value()),
                code: code::INTERNAL_ERROR,
                message: "Internal error: the call failed inside the server (a bug in \
                          agent-exec); its work was stopped. Send it again, and report this"
                    .into(),
            }),
        }
    }

    fn handle(&mut self, message: Incoming) {
        match message {
            Incoming::Blank => {}
            Incoming::Response { id, outcome } => {
                // An answer to one of our requests; one nothing waits for (withdrawn, or never
                // sent) is dropped, as JSON-RPC has no reply to a response.
                if let (Some(r), Some(id)) = (&self.requester, id) {
                    r.resolve(&id, outcome);
                }
            }
            Incoming::Refused(r) => self.refuse(&r),
            Incoming::Notification { method, params } => {
                if method == "notifications/cancelled" {
                    let id = params
                        .as_ref()
                        .and_then(|p| p.get("requestId"))
                        .and_then(Id::from_value);
                    if let Some(flight) = id.and_then(|id| self.flights.get_mut(&id)) {
                        flight.cancelled = true;
                        flight.cancel.send_replace(true);
                    }
                }
                // Everything else (initialized, progress, roots changed, …) asks nothing of a
                // tools-only server, and a notification is never answered.
            }
            Incoming::Request { id, method, params } => {
                if let Err(r) = self.request(&id, &method, params) {
                    self.refuse(&r);
                }
            }
        }
    }

    fn request(&mut self, id: &Id, method: &str, params: Option<Value>) -> Result<(), Refusal> {
        let invalid_request = |message: String| Refusal {
            id: Some(id.to_value()),
            code: code::INVALID_REQUEST,
            message: format!("Invalid Request: {message}"),
        };
        if let Some(flight) = self.flights.get(id) {
            let state = if flight.cancelled {
                "was cancelled and is still being stopped (a cancelled request gets no reply)"
            } else {
                "is still in flight; it keeps running and gets its own reply"
            };
            return Err(invalid_request(format!(
                "a request with id {} {state}. Use a new id for every request",
                id.to_value()
            )));
        }
        match method {
            "initialize" => self.initialize(id, params),
            // The spec allows ping at any time, before initialize too.
            "ping" => {
                self.reply(id, json!({}));
                Ok(())
            }
            "tools/list" | "tools/call" if !self.initialized => Err(invalid_request(format!(
                "{method} before initialize; send initialize first (the MCP lifecycle)"
            ))),
            "logging/setLevel" if self.notifier.is_some() => {
                if !self.initialized {
                    return Err(invalid_request(format!(
                        "{method} before initialize; send initialize first (the MCP lifecycle)"
                    )));
                }
                self.set_level(id, params)
            }
            "tools/list" => {
                params_object(id, method, params, "{\"cursor\"?}")?;
                let tools = self.service.list_tools();
                self.reply(id, tools);
                Ok(())
            }
            "tools/call" => self.call(id, params),
            _ => Err(Refusal {
                id: Some(id.to_value()),
                code: code::METHOD_NOT_FOUND,
                message: format!(
                    "Method not found: {method:?}; this server answers initialize, ping, \
                     tools/list{} and tools/call",
                    if self.notifier.is_some() {
                        ", logging/setLevel"
                    } else {
                        ""
                    }
                ),
            }),
        }
    }

    fn initialize(&mut self, id: &Id, params: Option<Value>) -> Result<(), Refusal> {
        let method = "initialize";
        let shape = "{\"protocolVersion\", \"capabilities\", \"clientInfo\"}";
        if self.initialized {
            return Err(Refusal {
                id: Some(id.to_value()),
                code: code::INVALID_REQUEST,
                message: "Invalid Request: initialize was already answered on this connection; \
                          a connection is initialized once"
                    .into(),
            });
        }
        let Some(p) = params_object(id, method, params, shape)? else {
            return Err(invalid_params(
                id,
                format!("initialize needs params {shape}"),
            ));
        };
        let version = string_field(
            id,
            method,
            &p,
            "protocolVersion",
            "the MCP revision the client speaks, e.g. \"2025-11-25\"",
        )?;
        for field in ["capabilities", "clientInfo"] {
            match p.get(field) {
                Some(Value::Object(_)) => {}
                None => {
                    return Err(invalid_params(
                        id,
                        format!("initialize params.{field} is missing; give an object"),
                    ));
                }
                Some(other) => {
                    return Err(invalid_params(
                        id,
                        format!(
                            "initialize params.{field} must be an object, not {}",
                            kind(other)
                        ),
                    ));
                }
            }
        }
        let newest = PROTOCOL_VERSIONS.last().copied().unwrap_or("2025-11-25");
        let version = PROTOCOL_VERSIONS
            .iter()
            .copied()
            .find(|v| *v == version)
            .unwrap_or(newest);
        self.initialized = true;
        if let Some(r) = &self.requester {
            r.set_elicitation(declares_form_elicitation(p.get("capabilities")));
        }
        let result = self.service.initialize(version);
        self.reply(id, result);
        // After the result, so no notice reaches a client before it knows the capability.
        if let Some(n) = &self.notifier {
            n.set_initialized();
        }
        Ok(())
    }

    /// `logging/setLevel`: the lowest level of the notices sent from now on.
    fn set_level(&mut self, id: &Id, params: Option<Value>) -> Result<(), Refusal> {
        let method = "logging/setLevel";
        let names: Vec<&str> = Level::ALL.iter().map(|l| l.as_str()).collect();
        let what = format!("one of {}", names.join(", "));
        let shape = format!("{{\"level\"}}, the level {what}");
        let Some(p) = params_object(id, method, params, &shape)? else {
            return Err(invalid_params(
                id,
                format!("logging/setLevel needs params {shape}"),
            ));
        };
        let name = string_field(id, method, &p, "level", &what)?;
        let Some(level) = Level::from_name(&name) else {
            return Err(invalid_params(
                id,
                format!("logging/setLevel params.level {name:?} is not a level; give {what}"),
            ));
        };
        if let Some(n) = &self.notifier {
            n.set_level(level);
        }
        self.reply(id, json!({}));
        Ok(())
    }

    fn call(&mut self, id: &Id, params: Option<Value>) -> Result<(), Refusal> {
        let method = "tools/call";
        let shape = "{\"name\", \"arguments\"}";
        let Some(mut p) = params_object(id, method, params, shape)? else {
            return Err(invalid_params(
                id,
                format!("tools/call needs params {shape}: the tool's name and its arguments"),
            ));
        };
        let name = string_field(id, method, &p, "name", "the name of the tool to call")?;
        let arguments = match p.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(a)) => a,
            Some(other) => {
                return Err(invalid_params(
                    id,
                    format!(
                        "tools/call params.arguments must be an object of the tool's arguments, \
                         not {}",
                        kind(&other)
                    ),
                ));
            }
        };
        if self.flights.len() >= MAX_IN_FLIGHT {
            return Err(Refusal {
                id: Some(id.to_value()),
                code: code::SERVER_BUSY,
                message: format!(
                    "Server busy: this connection already runs {MAX_IN_FLIGHT} tools/call \
                     requests; nothing was started. Wait for a reply, then send this again"
                ),
            });
        }
        let (cancel, cancelled) = watch::channel(false);
        let call = self
            .service
            .call(id, &name, arguments, Cancel(cancelled))
            .map_err(|message| invalid_params(id, message))?;
        let task = self.tasks.spawn(call).id();
        self.task_ids.insert(task, id.clone());
        self.flights.insert(
            id.clone(),
            Flight {
                cancel,
                cancelled: false,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The connection against a fake service whose calls the test releases, over real pipes.

    use super::*;
    use std::io::{BufRead, PipeReader, PipeWriter};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// Calls named `wait` run until the test releases them (or they are cancelled); `echo`
    /// answers at once with `reply_bytes` of text.
    struct Fake {
        started: Arc<AtomicUsize>,
        cancelled: Arc<AtomicUsize>,
        release: watch::Receiver<bool>,
        reply_bytes: usize,
        names: Mutex<Vec<String>>,
        requester: Requester,
        notifier: Notifier,
    }

    impl Fake {
        fn started_after(&self) -> Arc<AtomicUsize> {
            Arc::clone(&self.started)
        }
    }

    impl Service for Fake {
        fn requester(&self) -> Option<Requester> {
            Some(self.requester.clone())
        }

        fn notifier(&self) -> Option<Notifier> {
            Some(self.notifier.clone())
        }

        fn initialize(&self, protocol_version: &str) -> Value {
            json!({"protocolVersion": protocol_version})
        }

        fn list_tools(&self) -> Value {
            json!({"tools": []})
        }

        fn call(
            &self,
            id: &Id,
            name: &str,
            _arguments: Map<String, Value>,
            mut cancel: Cancel,
        ) -> Result<CallFuture, String> {
            if name == "ask" {
                // Asks the client, and answers with what came back.
                let requester = self.requester.clone();
                let cancelled = Arc::clone(&self.cancelled);
                return Ok(Box::pin(async move {
                    let answer = tokio::select! {
                        a = requester.elicit(json!({"message": "Run it?"})) => a,
                        () = cancel.cancelled() => {
                            cancelled.fetch_add(1, Ordering::SeqCst);
                            return json!({"cancelled": true});
                        }
                    };
                    let text = match answer {
                        Ok(result) => result.to_string(),
                        Err(e) => format!("{e:?}"),
                    };
                    json!({"content": [{"type": "text", "text": text}], "isError": false})
                }));
            }
            if name == "notify" {
                // One notice at each level, then the reply: what became of each.
                let notifier = self.notifier.clone();
                return Ok(Box::pin(async move {
                    let pushed: Vec<String> = Level::ALL
                        .into_iter()
                        .map(|l| {
                            let n = Notice::log(l, "test", json!({"at": l.as_str()}));
                            format!("{:?}", notifier.push(&n))
                        })
                        .collect();
                    json!({"content": [{"type": "text", "text": pushed.join(",")}], "isError": false})
                }));
            }
            if name == "flood" {
                // Notices of 64 KiB until the queue is full: how many were queued (counted in
                // `started` once done).
                let notifier = self.notifier.clone();
                let fake = self.started_after();
                return Ok(Box::pin(async move {
                    let big = Notice::log(Level::Info, "test", json!("n".repeat(64 * 1024)));
                    let mut sent = 0;
                    while notifier.push(&big) == Pushed::Sent {
                        sent += 1;
                    }
                    fake.fetch_add(1, Ordering::SeqCst);
                    json!({"content": [{"type": "text", "text": sent.to_string()}], "isError": false})
                }));
            }
            if name != "wait" && name != "echo" {
                return Err(format!("no tool {name:?}"));
            }
            self.started.fetch_add(1, Ordering::SeqCst);
            self.names.lock().unwrap().push(format!("{name} {id}"));
            let wait = name == "wait";
            let mut release = self.release.clone();
            let cancelled = Arc::clone(&self.cancelled);
            let text = "x".repeat(self.reply_bytes);
            Ok(Box::pin(async move {
                if wait {
                    tokio::select! {
                        _ = release.wait_for(|r| *r) => {}
                        () = cancel.cancelled() => {
                            cancelled.fetch_add(1, Ordering::SeqCst);
                            return json!({"cancelled": true});
                        }
                    }
                }
                json!({"content": [{"type": "text", "text": text}], "isError": false})
            }))
        }
    }

    struct Client {
        fake: Arc<Fake>,
        release: watch::Sender<bool>,
        input: Option<PipeWriter>,
        output: Option<PipeReader>,
        replies: Option<std::sync::mpsc::Receiver<Value>>,
        server: std::thread::JoinHandle<io::Result<End>>,
    }

    impl Client {
        /// A connection whose output the test has not started reading; `watch` polls the
        /// output for hang-up like stdio does.
        fn start(reply_bytes: usize, watch: bool) -> Client {
            let (release, release_rx) = watch::channel(false);
            let fake = Arc::new(Fake {
                started: Arc::new(AtomicUsize::new(0)),
                cancelled: Arc::new(AtomicUsize::new(0)),
                release: release_rx,
                reply_bytes,
                names: Mutex::new(Vec::new()),
                requester: Requester::new(),
                notifier: Notifier::new(),
            });
            let (input_rx, input) = std::io::pipe().unwrap();
            let (output, output_tx) = std::io::pipe().unwrap();
            let watch = watch.then(|| output_tx.try_clone().unwrap().into());
            let service = Arc::clone(&fake);
            let server = std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(serve(service, input_rx, output_tx, watch))
            });
            Client {
                fake,
                release,
                input: Some(input),
                output: Some(output),
                replies: None,
                server,
            }
        }

        /// Started and initialized; the initialize reply is left unread.
        fn initializing(reply_bytes: usize, watch: bool) -> Client {
            let mut c = Client::start(reply_bytes, watch);
            c.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#);
            c
        }

        /// Initialized with the client capabilities `capabilities`.
        fn initialized_with(capabilities: &str) -> Client {
            let mut c = Client::start(1, false);
            c.send(&format!(r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{capabilities},"clientInfo":{{"name":"t","version":"0"}}}}}}"#));
            assert_eq!(c.recv()["id"], 0);
            c
        }

        fn initialized(reply_bytes: usize) -> Client {
            let mut c = Client::initializing(reply_bytes, false);
            assert_eq!(c.recv()["result"]["protocolVersion"], "2025-06-18");
            c
        }

        fn send(&mut self, line: &str) {
            let input = self.input.as_mut().unwrap();
            input.write_all(line.as_bytes()).unwrap();
            input.write_all(b"\n").unwrap();
        }

        fn call(&mut self, id: u64, tool: &str) {
            self.send(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
            ));
        }

        fn read_output(&mut self) {
            let output = self.output.take().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(output).lines() {
                    let Ok(line) = line else { return };
                    if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                        return;
                    }
                }
            });
            self.replies = Some(rx);
        }

        fn recv(&mut self) -> Value {
            if self.replies.is_none() {
                self.read_output();
            }
            // A liveness bound, not a speed check: a missing reply fails instead of hanging.
            self.replies
                .as_ref()
                .unwrap()
                .recv_timeout(Duration::from_secs(60))
                .expect("no reply")
        }

        fn started(&self) -> usize {
            self.fake.started.load(Ordering::SeqCst)
        }

        /// Closes the input, answers everything and returns how the server ended and the
        /// replies not read yet.
        fn finish(mut self) -> (End, Vec<Value>) {
            drop(self.input.take());
            if self.replies.is_none() {
                self.read_output();
            }
            let end = self.server.join().unwrap().unwrap();
            let rest = self.replies.take().unwrap().iter().collect();
            (end, rest)
        }
    }

    /// `reply` is the JSON-RPC error `code` for `id`, its message saying `says`.
    fn assert_error(reply: &Value, id: Value, code: i64, says: &str) {
        assert_eq!(
            (&reply["id"], &reply["error"]["code"]),
            (&id, &json!(code)),
            "{reply}"
        );
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{reply}");
    }

    #[test]
    fn an_elicitation_goes_to_a_client_that_declared_it_and_its_answer_comes_back_to_the_call() {
        let mut c = Client::initialized_with(r#"{"elicitation":{"form":{}}}"#);
        c.call(1, "ask");
        let request = c.recv();
        assert_eq!(
            (&request["method"], &request["params"]["message"]),
            (&json!("elicitation/create"), &json!("Run it?")),
            "{request}"
        );
        let asked = request["id"].clone();
        assert_eq!(asked, json!("agent-exec-1"));
        // A response nobody waits for is dropped; the right one reaches the call.
        c.send(r#"{"jsonrpc":"2.0","id":"agent-exec-99","result":{"action":"accept"}}"#);
        c.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{asked},"result":{{"action":"accept","content":{{"run":true}}}}}}"#
        ));
        let reply = c.recv();
        assert_eq!(reply["id"], 1);
        let text: Value =
            serde_json::from_str(reply["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, json!({"action": "accept", "content": {"run": true}}));
        // An error answer is the client's refusal.
        c.call(2, "ask");
        let asked = c.recv()["id"].clone();
        c.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{asked},"error":{{"code":-32601,"message":"no"}}}}"#
        ));
        let text = c.recv()["result"]["content"][0]["text"].clone();
        assert!(text.as_str().unwrap().starts_with("Refused("), "{text}");
        assert_eq!(c.finish(), (End::InputClosed, vec![]));
    }

    #[test]
    fn a_client_without_elicitation_is_never_asked() {
        for caps in [
            r#"{}"#,
            r#"{"elicitation":{"url":{}}}"#,
            r#"{"elicitation":true}"#,
        ] {
            let mut c = Client::initialized_with(caps);
            c.call(1, "ask");
            let reply = c.recv();
            assert_eq!(
                (&reply["id"], &reply["result"]["content"][0]["text"]),
                (&json!(1), &json!("NotSupported")),
                "{caps}: {reply}"
            );
            assert_eq!(c.finish(), (End::InputClosed, vec![]));
        }
    }

    #[test]
    fn a_cancelled_call_withdraws_its_pending_elicitation() {
        let mut c = Client::initialized_with(r#"{"elicitation":{}}"#);
        c.call(1, "ask");
        let asked = c.recv()["id"].clone();
        c.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
        let withdrawn = c.recv();
        assert_eq!(
            (&withdrawn["method"], &withdrawn["params"]["requestId"]),
            (&json!("notifications/cancelled"), &asked),
            "{withdrawn}"
        );
        assert!(withdrawn.get("id").is_none(), "{withdrawn}");
        // The late answer finds nothing waiting, and the cancelled call gets no reply.
        c.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{asked},"result":{{"action":"accept"}}}}"#
        ));
        let cancelled = Arc::clone(&c.fake.cancelled);
        assert_eq!(c.finish(), (End::InputClosed, vec![]));
        assert_eq!(cancelled.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn at_end_of_input_a_pending_elicitation_fails_and_its_call_is_answered() {
        let mut c = Client::initialized_with(r#"{"elicitation":{}}"#);
        c.call(1, "ask");
        assert_eq!(c.recv()["method"], "elicitation/create");
        let (end, rest) = c.finish();
        assert_eq!(end, End::InputClosed);
        assert_eq!(rest.len(), 1, "{rest:?}");
        assert_eq!(
            (&rest[0]["id"], &rest[0]["result"]["content"][0]["text"]),
            (&json!(1), &json!("Closed"))
        );
    }

    #[test]
    fn notices_follow_the_initialize_result_and_honour_logging_set_level() {
        let mut c = Client::start(1, false);
        // Before initialize nothing is sent, and setLevel is refused like tools/*.
        let early = Notice::log(Level::Emergency, "test", json!("early"));
        assert_eq!(c.fake.notifier.push(&early), Pushed::Full);
        c.send(r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}"#);
        assert_error(
            &c.recv(),
            json!(1),
            code::INVALID_REQUEST,
            "before initialize",
        );
        c.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#);
        assert_eq!(c.recv()["id"], 0);
        // Every level goes out until the client sets one.
        c.call(2, "notify");
        for level in Level::ALL {
            let notice = c.recv();
            assert_eq!(
                (
                    &notice["method"],
                    &notice["params"]["level"],
                    &notice["params"]["data"]
                ),
                (
                    &json!("notifications/message"),
                    &json!(level.as_str()),
                    &json!({"at": level.as_str()})
                ),
                "{notice}"
            );
            assert_eq!(notice["params"]["logger"], "test");
            assert!(notice.get("id").is_none(), "{notice}");
        }
        let reply = c.recv();
        assert_eq!(reply["id"], 2);
        assert_eq!(
            reply["result"]["content"][0]["text"],
            "Sent,Sent,Sent,Sent,Sent,Sent,Sent,Sent"
        );
        // Bad levels are invalid params naming the levels.
        for (params, says) in [
            (r#"{"level":"verbose"}"#, "is not a level"),
            (r#"{"level":3}"#, "must be a string"),
            (r#"{}"#, "params.level is missing"),
            (r#""warning""#, "must be an object"),
        ] {
            c.send(&format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{params}}}"#
            ));
            let reply = c.recv();
            assert_error(&reply, json!(3), code::INVALID_PARAMS, says);
            assert!(
                reply["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("debug, info, notice"),
                "{reply}"
            );
        }
        c.send(
            r#"{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"warning"}}"#,
        );
        assert_eq!(c.recv(), json!({"jsonrpc": "2.0", "id": 4, "result": {}}));
        c.call(5, "notify");
        for level in ["warning", "error", "critical", "alert", "emergency"] {
            assert_eq!(c.recv()["params"]["level"], level);
        }
        assert_eq!(
            c.recv()["result"]["content"][0]["text"],
            "Filtered,Filtered,Filtered,Sent,Sent,Sent,Sent,Sent"
        );
        let notifier = c.fake.notifier.clone();
        assert_eq!(c.finish(), (End::InputClosed, vec![]));
        // The connection is over: nothing more can be sent.
        assert_eq!(notifier.push(&early), Pushed::Closed);
    }

    #[test]
    fn notices_never_grow_the_queue_of_a_client_that_does_not_read() {
        let mut c = Client::initializing(1, false);
        c.call(1, "flood");
        while c.started() < 1 {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Nobody reads: the flood stops at the bound (beyond what the pipe took), and its reply
        // still comes once the client reads.
        #[cfg(target_os = "linux")]
        let pipe = rustix::pipe::fcntl_getpipe_size(c.output.as_ref().unwrap()).unwrap();
        // A pipe holds at most 64 KiB elsewhere (macOS: 16 KiB, growing to 64 KiB).
        #[cfg(not(target_os = "linux"))]
        let pipe = 64 * 1024;
        assert_eq!(c.recv()["id"], 0);
        let mut floods = Vec::new();
        let mut notices = 0;
        while floods.is_empty() {
            let m = c.recv();
            if m["method"] == "notifications/message" {
                notices += 1;
            } else {
                floods.push(
                    m["result"]["content"][0]["text"]
                        .as_str()
                        .unwrap()
                        .parse::<usize>()
                        .unwrap(),
                );
            }
        }
        let bound = (MAX_QUEUED_REPLY_BYTES + pipe) / (64 * 1024) + 2;
        assert!(floods[0] <= bound, "{floods:?} > {bound}");
        assert!(
            floods[0] >= MAX_QUEUED_REPLY_BYTES / (65 * 1024),
            "{floods:?}"
        );
        assert_eq!(notices, floods[0]);
        assert_eq!(c.finish(), (End::InputClosed, vec![]));
    }

    #[test]
    fn a_duplicate_in_flight_id_is_refused_and_runs_nothing_and_the_first_gets_its_reply() {
        let mut c = Client::initialized(3);
        c.call(5, "wait");
        c.call(5, "echo");
        c.send(r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#);
        for _ in 0..2 {
            assert_error(
                &c.recv(),
                json!(5),
                code::INVALID_REQUEST,
                "id 5 is still in flight",
            );
        }
        assert_eq!(c.started(), 1);
        c.release.send_replace(true);
        let reply = c.recv();
        assert_eq!(
            (
                reply["id"].clone(),
                reply["result"]["content"][0]["text"].clone()
            ),
            (json!(5), json!("xxx"))
        );
        // Answered, the id is free again.
        c.call(5, "echo");
        assert_eq!(c.recv()["result"]["isError"], false);
        assert_eq!(*c.fake.names.lock().unwrap(), ["wait 5", "echo 5"]);
        let (end, rest) = c.finish();
        assert_eq!((end, rest), (End::InputClosed, vec![]));
    }

    #[test]
    fn beyond_the_in_flight_limit_a_call_is_refused_as_busy_and_runs_nothing() {
        let mut c = Client::initialized(1);
        for id in 1..=MAX_IN_FLIGHT as u64 {
            c.call(id, "wait");
        }
        c.call(99, "echo");
        assert_error(&c.recv(), json!(99), code::SERVER_BUSY, "already runs 32");
        assert_eq!(c.started(), MAX_IN_FLIGHT);
        c.release.send_replace(true);
        let mut ids: Vec<u64> = (0..MAX_IN_FLIGHT)
            .map(|_| c.recv()["id"].as_u64().unwrap())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, (1..=MAX_IN_FLIGHT as u64).collect::<Vec<_>>());
        c.call(100, "echo");
        assert_eq!(c.recv()["id"], 100);
        assert_eq!(c.finish().1, Vec::<Value>::new());
    }

    #[test]
    fn a_cancelled_call_is_stopped_and_gets_no_reply() {
        let mut c = Client::initialized(1);
        c.call(1, "wait");
        c.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
        c.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
        assert_eq!(c.recv()["id"], 2);
        let cancelled = Arc::clone(&c.fake.cancelled);
        let (end, rest) = c.finish();
        assert_eq!((end, rest), (End::InputClosed, vec![]));
        assert_eq!(cancelled.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn end_of_input_still_answers_every_request_read_including_a_final_line_without_newline() {
        let mut c = Client::initialized(2);
        c.call(1, "wait");
        let input = c.input.as_mut().unwrap();
        input
            .write_all(
                br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}"#,
            )
            .unwrap();
        drop(c.input.take());
        // The second is answered while the first still runs; the first once released.
        assert_eq!(c.recv()["id"], 2);
        std::thread::sleep(Duration::from_millis(50));
        c.release.send_replace(true);
        assert_eq!(c.recv()["id"], 1);
        let (end, rest) = c.finish();
        assert_eq!((end, rest), (End::InputClosed, vec![]));
    }

    #[test]
    fn when_the_output_is_closed_running_calls_are_cancelled_and_the_server_returns() {
        // Noticed without writing anything (the stdio watch), and by a failed write.
        for watch in [true, false] {
            let mut c = Client::initializing(1, watch);
            c.call(1, "wait");
            c.call(2, "wait");
            while c.started() < 2 {
                std::thread::yield_now();
            }
            drop(c.output.take());
            if !watch {
                // The next reply's write fails.
                c.call(3, "echo");
            }
            let end = c.server.join().unwrap().unwrap();
            assert_eq!(end, End::HungUp { stopped: 2 }, "watch: {watch}");
            assert_eq!(c.fake.cancelled.load(Ordering::SeqCst), 2);
        }
    }

    #[test]
    fn the_reader_stops_while_replies_wait_beyond_the_bound_and_every_request_is_answered() {
        const N: usize = 300;
        const REPLY: usize = 192 * 1024;
        // MAX_IN_FLIGHT replies are more than the bound; requests padded so the input pipe
        // holds only a few.
        let mut c = Client::initializing(REPLY, false);
        let mut input = c.input.take().unwrap();
        let written = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&written);
        let pad = "p".repeat(16 * 1024);
        let writer = std::thread::spawn(move || {
            for id in 1..=N {
                let line = format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"pad\":\"{pad}\"}}}}}}\n"
                );
                input.write_all(line.as_bytes()).unwrap();
                count.fetch_add(1, Ordering::SeqCst);
            }
        });
        // Let the server get as far as it goes while nobody reads its output.
        let mut last = (usize::MAX, Instant::now());
        while last.1.elapsed() < Duration::from_millis(500) {
            let now = written.load(Ordering::SeqCst);
            if now != last.0 {
                last = (now, Instant::now());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            last.0 < N,
            "the server read every request although nobody read a reply"
        );
        assert!(
            c.started() <= MAX_IN_FLIGHT + MAX_QUEUED_REPLY_BYTES / REPLY + 2,
            "{} calls started",
            c.started()
        );
        // Once the client reads, everything is read and each request answered exactly once.
        assert_eq!(c.recv()["id"], 0);
        let mut seen = vec![0u32; N + 1];
        for _ in 0..N {
            let reply = c.recv();
            seen[reply["id"].as_u64().unwrap() as usize] += 1;
        }
        writer.join().unwrap();
        assert!(seen[1..].iter().all(|&n| n == 1));
        let (end, rest) = c.finish();
        assert_eq!((end, rest.len()), (End::InputClosed, 0));
    }
}
