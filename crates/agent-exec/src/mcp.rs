//! The MCP server: the host's tools offered to any Model Context Protocol client over stdio
//! (`agent-exec mcp`): JSON-RPC 2.0, one message per line, MCP revisions 2024-11-05 to
//! 2025-11-25 (the ones with an `initialize` handshake), the `tools` capability, and `logging`
//! when `background_command` is served (its events, below).
//!
//! # How MCP requests map to sessions and turns
//!
//! - **One connection, one set of [`Session`]s.** The server is built from host sessions
//!   ([`McpServer::add_session`]); each tool is routed to the first session whose configuration
//!   offers it (PERM-4) *and* can run it: the exec tools need mode `yolo`, `run` a `mounted`
//!   workspace (PERM-3), `command` a `direct` or `app-private` one (CMD-1), `run_command`
//!   and `background_command` a `direct` one. `agent-exec mcp` without `--config` uses two
//!   sessions on the same folder — `direct` for `read`, `write`, `edit`, `grep`, `command`,
//!   `run_command` and the three background tools, `mounted` for `run` — the workspace kinds
//!   `agent-exec call` uses for each tool. With `--config` it uses exactly that one
//!   configuration (`background_status` and `background_cancel` come with
//!   `background_command`, `AgentConfig::offers`).
//! - **`tools/list`** lists the routed tools, each with the JSON Schema of its arguments from the
//!   [`Registry`](host_shim::Registry).
//! - **One `tools/call`, one [`Turn`](host_shim::Turn)** ([`Session::one_call`]). MCP has no notion of an agent turn, so each
//!   call is a one-call turn, like `agent-exec call`: a fresh `ToolScope` (TS-1, TS-2), the
//!   grants checked before and watched during the call (TS-3), and for `mounted` a mirror taken
//!   at the start and written back only when the call succeeded (RUN-11; the mirror's fate is in
//!   the result's `"mirror"`). A host that knows its agent's turns embeds this crate and calls
//!   [`Session::begin_turn`] itself.
//! - **callId** is `mcp-<request id>` (the JSON-RPC id of the `tools/call`), or `mcp-call-<n>`
//!   when that id is too long to be a callId.
//! - **Results.** One text block holding the tool's JSON result with `"ok": true` merged in —
//!   the line `agent-exec call` prints — and nothing else: the output is carried once. MCP
//!   (2025-06-18 and later) makes `structuredContent` optional for a tool without an
//!   `outputSchema` and says a tool that sends it SHOULD also send the same JSON as text for
//!   clients that predate it; the text block is the part every client reads, so it is the one
//!   kept (sending both doubled every reply). A failed call is an MCP *tool error*
//!   (`isError: true`) whose text is the error object
//!   `{"ok": false, "code": "AGENT_EXEC_…", "message": "…"}`, so the agent reads what went wrong
//!   and what to do instead. A state file that cannot be read makes a call fail with the CLI's
//!   error for it (`AGENT_EXEC_IO_FAILED`, "state file … is not valid"), not as a missing plugin
//!   or a revoked permission.
//! - **Protocol errors** are JSON-RPC errors, each naming what was wrong: an unknown tool, a
//!   `params.name` that is not a string, `arguments` that are not an object, missing params →
//!   `-32602`; `tools/list` or `tools/call` before `initialize` → `-32600` (`ping` is always
//!   answered); an unknown method → `-32601`. Nothing is printed per message: stderr only says
//!   what is served. Malformed lines
//!   (not JSON, not UTF-8, too deep, over 16 MiB) are answered too, with the request's id when
//!   it can be read (`mcp/wire.rs` has the table).
//! - **Exactly one reply per request**, also for a duplicate id (`-32600`, the first keeps
//!   running), for a final line without `\n`, and beyond the limits: at most
//!   [`MAX_IN_FLIGHT`](conn::MAX_IN_FLIGHT) (32) calls run per connection (`-32000` beyond),
//!   and no message is read while more than 4 MiB of replies wait for the client
//!   (backpressure, so a client that does not read cannot grow the server). `mcp/conn.rs` argues
//!   each of these.
//! - **Cancellation.** `notifications/cancelled` for a running call stops it: the tool's process
//!   tree is stopped (RUN-10, CMD-6), the turn ends as failed, and — as MCP asks — the cancelled
//!   request gets no reply.
//! - **End of the connection.** When the client closes our stdin, every request already read is
//!   still served and answered, then the server exits. When the client stops reading (our stdout
//!   is closed: a write fails with `EPIPE`, or the pipe reports its reader gone even while
//!   nothing is written), nothing further is read or started, every running call is cancelled
//!   (process trees stopped) and the server exits once they have ended.
//! - **Approvals.** `command`'s `extraPaths` need the user's approval for the call (CMD-3); this
//!   server has no channel to ask the user, so it asks the host's approver, which for
//!   `agent-exec mcp` approves nothing: calls with extra paths are refused with a permission
//!   error naming the path.
//! - **`run_command`'s questions** ([`McpAsker`]). A confirmation is asked with MCP
//!   elicitation: `elicitation/create` whose message is the question's one rendering
//!   (`Question::text`, TRUST-4: every command, write path, the network, leaving the sandbox,
//!   the agent's text escaped in markdown code spans) and a one-field form (`run`: boolean).
//!   It is asked only when the client declared the `elicitation` capability (form mode) in
//!   `initialize`: `accept` with `run: true` is a yes; `accept` with `false`, `decline` and
//!   `cancel` are a no; a client without the capability, an error answer, or a connection that
//!   ends first cannot be asked, and the call comes back not executed (never an assumed yes).
//!   A password is **never** asked over MCP (the spec forbids collecting secrets with a form):
//!   such a call comes back not executed, its message saying to run it with `agent-exec call
//!   run_command` in a terminal. Cancelling the `tools/call` withdraws its pending elicitation
//!   (`notifications/cancelled` to the client). A `run_command` result — also one not executed
//!   or exiting non-zero — is a result (`isError: false`, with `executed`, `exitCode`,
//!   `message`), as `command`'s non-zero exits are; refusals (`RUN_COMMAND_*`) are tool errors.
//!
//! # Background tasks (`background_command`, BG-1…BG-9)
//!
//! - **One session, for the connection's life.** `background_command`, `background_status`
//!   and `background_cancel` are served by one session — the one that also serves `read`
//!   without `--config` (`direct`), so `read` of a task's `logPath` works (BG-6, host-shim).
//!   The server takes that session's event stream once, when the session is added
//!   ([`Session::background_events`], BG-7's delivery target), and drains it while the
//!   connection lasts. When the connection ends — stdin closed and every reply written, or
//!   stdout gone — every task is stopped and waited for and the session's log directory
//!   removed ([`Session::end_background`]) before the server exits: nothing outlives the
//!   connection (invariant 4).
//! - **Each event is a `notifications/message`** (MCP logging) from logger
//!   [`BACKGROUND_LOGGER`] (`"agent-exec/background"`), its `data` the event's JSON exactly as
//!   the library serialises it — structured content whose `"event"` is `started`, `report`,
//!   `finished` or `groupCompleted`. Why logging: it is the one server-to-client message of
//!   MCP that carries arbitrary JSON at any time, outside a request, and that every client
//!   library surfaces (the Python SDK's `logging_callback`, the TypeScript SDK's
//!   `LoggingMessageNotification` handler); `notifications/progress` needs a request still
//!   running (ours returned at once), and resources with `notifications/resources/updated`
//!   carry no content (the client must read the resource again) and few clients subscribe.
//!   The tasks are also readable on demand with `background_status` (a tool: what an agent
//!   can call; every client lists tools). The 2026-07-28 revision deprecates logging
//!   (SEP-2577); this server does not speak that revision. The **level**: `warning` for a
//!   keyword report; `error` for a task that exited non-zero, was killed by a signal, timed
//!   out or could not run; `notice` for a cancelled one; `info` for a start, a clean exit
//!   and a completed group. The server declares the `logging` capability and answers
//!   `logging/setLevel`: below the level the client set, events are not sent (they stay
//!   readable with `background_status`).
//! - **Bounded.** Notices go through the connection's output queue like replies (`conn`), and
//!   are queued only while it holds at most 4 MiB: a client that does not read never grows
//!   it. Events that find no room are held — at most [`MAX_HELD_EVENTS`] (64) and
//!   [`MAX_HELD_BYTES`] (4 MiB), the newest always kept — and offered again every 100 ms;
//!   beyond the bound the oldest keyword reports are dropped first (a later report or the
//!   end carries the latest output), then starts, then the oldest of the rest. Once room
//!   returns, one `{"event": "dropped", "count": N, "message"}` notice (level `warning`)
//!   says how many were lost, before the held ones. The tasks never wait for the client.
//! - **Origins and groups (BG-9).** A `tools/call` is a one-call turn whose origin has ended
//!   when it returns, so every event is `"delivery": "held"` and each call's tasks (or the
//!   legs named with the same `group`) complete as one `groupCompleted` with every leg's
//!   `objective`, `next`, reports and outcome.
//! - **No decision model (BG-5).** Every keyword hit is reported (`"check": "none"`); MCP
//!   sampling is not used to filter them.
//!
//! # Why not `rmcp`
//!
//! The official Rust SDK's service loop and stdio transport fail below any handler we could
//! write. Requests in flight are kept in a map by id, so a duplicate id replaces the first's
//! entry and the second's reply is dropped. It never stops reading, and spawns one task per
//! reply waiting to be written, so a client that does not read grows the server without bound;
//! an unparsable line or one whose id it cannot route is dropped unanswered; the last line without `\n` is discarded at
//! end of input; wrong params fall through its untagged request enum to "method not found";
//! a request before `initialize` is answered with the 2026 per-request `_meta` error; and a
//! failed write is logged while the loop goes on executing requests. A front layer could mend
//! each of these only by re-implementing the framing, the lifecycle, the id table and the
//! output queue — everything but the dispatch of four methods — so the loop is ours: about as
//! much code as the workarounds would have been, with the limits in one place. The wire shapes
//! (initialize result, tool list, `CallToolResult`) are the MCP schema's and are pinned by the
//! test with the Python SDK's client, which validates every message it receives.

mod conn;
mod wire;

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use host_shim::background::{Event, EventStream, Final};
use host_shim::{
    Asker, CallOptions, Confirmation, KeepMirror, PasswordReply, Question, Session, ToolName,
};
use serde_json::{Map, Value, json};

use conn::{Level, Notice, Notifier, Pushed};

/// The longest MCP request id used verbatim in a callId (toolscope allows 256 bytes).
const MAX_REQUEST_ID_IN_CALL_ID: usize = 200;

/// Why the MCP server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// Reading the client's messages or starting the connection's threads failed (the requests
    /// read before were still answered).
    #[error("the MCP connection failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The `logger` of the background events' notices.
pub const BACKGROUND_LOGGER: &str = "agent-exec/background";

/// The most background events held while the client does not read (beyond: dropped, see the
/// module docs).
pub const MAX_HELD_EVENTS: usize = 64;

/// The most bytes of background events held while the client does not read.
pub const MAX_HELD_BYTES: usize = 4 * 1024 * 1024;

/// How often held events are offered again while the client does not read.
const RETRY_HELD: std::time::Duration = std::time::Duration::from_millis(100);

/// A session's tool that this server serves.
#[derive(Clone, Debug)]
struct Route {
    session: Session,
    /// The JSON Schema of its arguments, as listed.
    schema: Value,
}

/// An MCP server offering the tools of one or more host [`Session`]s (see the module docs for
/// how requests map to sessions and turns).
///
/// A session that offers a tool it cannot run gets no route for it, and says why
/// (`a_session_lists_only_the_tools_it_can_run`).
#[derive(Clone, Debug)]
pub struct McpServer {
    name: String,
    instructions: Option<String>,
    routes: BTreeMap<ToolName, Route>,
    calls: Arc<AtomicU64>,
    options: CallOptions,
    /// This connection's requests to the client (elicitation), shared with [`McpAsker`].
    requester: conn::Requester,
    /// This connection's notices to the client (the background events).
    notifier: Notifier,
    /// The session serving `background_command`, and its event stream until served.
    background: Option<Background>,
}

/// The session that serves `background_command` (and its status and cancel) and the stream
/// of its events, taken once when the session was added and drained by [`deliver`] while the
/// connection lasts.
#[derive(Clone, Debug)]
struct Background {
    session: Session,
    events: Arc<std::sync::Mutex<Option<EventStream>>>,
}

impl Background {
    fn take_events(&self) -> Option<EventStream> {
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// `run_command`'s [`Asker`] over one MCP connection (module docs): confirmations by
/// elicitation when the client declared it, passwords never.
#[derive(Clone, Debug)]
pub struct McpAsker {
    requester: conn::Requester,
}

/// The elicitation form of a confirmation: the question's text as the message, one required
/// boolean. The message is [`Question::text`] as it is (TRUST-4): the agent's text in it is
/// escaped and inside markdown code spans, so neither a client that shows plain text nor one
/// that renders markdown shows anything the agent shaped; the form's own fields hold none of
/// it.
pub(crate) fn confirmation_form(q: &Question) -> Value {
    json!({
        "message": format!("agent-exec run_command: {}", q.text()),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "run": {
                    "type": "boolean",
                    "title": "Allow it",
                    "description": "Yes allows everything the message lists, for this call only",
                    "default": false,
                },
            },
            "required": ["run"],
        },
    })
}

/// The client's `ElicitResult` as an answer: only `accept` with `run: true` is a yes.
fn confirmation_of(result: &Value) -> Confirmation {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") if result.pointer("/content/run") == Some(&Value::Bool(true)) => {
            Confirmation::Yes
        }
        Some("accept" | "decline" | "cancel") => Confirmation::No,
        // Not an ElicitResult: the client did not answer the question.
        _ => Confirmation::CannotAsk,
    }
}

impl Asker for McpAsker {
    fn confirm<'a>(
        &'a self,
        q: &'a Question,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Confirmation> + Send + 'a>> {
        Box::pin(async move {
            match self.requester.elicit(confirmation_form(q)).await {
                Ok(result) => confirmation_of(&result),
                Err(
                    conn::RequestError::NotSupported
                    | conn::RequestError::Closed
                    | conn::RequestError::Refused(_),
                ) => Confirmation::CannotAsk,
            }
        })
    }

    fn password<'a>(
        &'a self,
        _q: &'a Question,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = PasswordReply> + Send + 'a>> {
        // MCP forbids collecting secrets through elicitation: never asked here.
        Box::pin(async { PasswordReply::CannotAsk })
    }

    fn cannot_ask_advice(&self) -> String {
        // The command line's own flags (--yes, --password-fd) mean nothing to an MCP client.
        "a password is never collected over MCP, and a confirmation only from a client that \
         supports elicitation; the user can run this call with `agent-exec call run_command` \
         from a terminal, which asks there"
            .to_owned()
    }
}

fn schema_object(schema: Value) -> Map<String, Value> {
    match schema {
        Value::Object(map) => map,
        // Every registered tool has an object schema; a host's own handler might not, and MCP
        // requires one: accept any object rather than advertising nothing.
        _ => {
            let mut map = Map::new();
            map.insert("type".into(), Value::String("object".into()));
            map
        }
    }
}

impl McpServer {
    /// A server that calls itself `name` in the MCP handshake and serves no tools yet.
    pub fn new(name: impl Into<String>) -> McpServer {
        McpServer {
            name: name.into(),
            instructions: None,
            routes: BTreeMap::new(),
            calls: Arc::new(AtomicU64::new(0)),
            options: CallOptions::default(),
            requester: conn::Requester::new(),
            notifier: Notifier::new(),
            background: None,
        }
    }

    /// The asker for `run_command` on this server's connection, for the host's registry
    /// (`host_shim::RunCommandSetup`).
    pub fn asker(&self) -> Arc<dyn Asker> {
        Arc::new(McpAsker {
            requester: self.requester.clone(),
        })
    }

    /// The per-call options every call gets (e.g. [`CallOptions::toolchains`]).
    #[must_use]
    pub fn with_call_options(mut self, options: CallOptions) -> McpServer {
        self.options = options;
        self
    }

    /// Routes to `session` every tool its configuration offers and can run that no earlier
    /// session serves. Returns one line per offered tool it cannot serve, saying why. The first
    /// session's non-empty `systemPrompt` becomes the server's MCP `instructions`.
    ///
    /// `background_status` and `background_cancel` go with `background_command` to one
    /// session, which must run it; that session's background events are taken here
    /// ([`Session::background_events`]) and sent to the client while [`McpServer::serve_stdio`]
    /// runs (the module docs say how). A session whose events were taken by someone else does
    /// not serve the three: nobody here would hear its tasks.
    pub fn add_session(&mut self, session: &Session) -> Vec<String> {
        // Not `Session::keep_mirror_warm`: its folder journal misses changes it cannot hear
        // (writes through a hard link made elsewhere, remote or FUSE
        // edits, mounts), so every turn refreshes by the walk, one `statx` per file.
        let mut skipped = Vec::new();
        let mut added_background = Vec::new();
        let registry = session.host().registry();
        for &tool in ToolName::ALL {
            if !session.config().offers(tool) || self.routes.contains_key(&tool) {
                continue;
            }
            // Status and cancel are served where their tasks start, by the same rules.
            let rules = if is_background(tool) {
                ToolName::BackgroundCommand
            } else {
                tool
            };
            if let Some(why) = session.config().unrunnable(rules) {
                skipped.push(format!("{tool} is not served: {why}"));
                continue;
            }
            if is_background(tool) && self.background.is_some() {
                // Another session serves the background tools already.
                continue;
            }
            let Some(handler) = registry.get(tool) else {
                skipped.push(format!(
                    "{tool} is not served: this host has no {tool} tool"
                ));
                continue;
            };
            self.routes.insert(
                tool,
                Route {
                    session: session.clone(),
                    schema: Value::Object(schema_object(handler.input_schema())),
                },
            );
            if is_background(tool) {
                added_background.push(tool);
            }
        }
        let serves_background = added_background.contains(&ToolName::BackgroundCommand);
        if !serves_background {
            // Status and cancel without the tool that starts tasks would have no tasks.
            for tool in added_background {
                self.routes.remove(&tool);
            }
        } else if self.background.is_none() {
            match session.background_events(|_| {}) {
                Ok(events) => {
                    self.background = Some(Background {
                        session: session.clone(),
                        events: Arc::new(std::sync::Mutex::new(Some(events))),
                    });
                }
                Err(e) => {
                    for tool in added_background {
                        self.routes.remove(&tool);
                        skipped.push(format!("{tool} is not served: {}", e.message()));
                    }
                }
            }
        }
        if self.instructions.is_none() && !session.config().system_prompt.is_empty() {
            self.instructions = Some(session.config().system_prompt.clone());
        }
        skipped
    }

    /// The tools served, in listing order.
    pub fn tools(&self) -> Vec<ToolName> {
        self.routes.keys().copied().collect()
    }

    /// Serves MCP on this process's stdin and stdout until the client closes stdin (every
    /// request read is answered first) or stops reading stdout (running calls are stopped).
    /// Needs a tokio runtime with IO and time enabled.
    ///
    /// The background tasks live as long as the connection: when it ends, every one is
    /// stopped and waited for, and the session's log directory removed
    /// ([`Session::end_background`]), before this returns.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        // A second descriptor of stdout, polled for the client closing its end while nothing
        // is being written (see `conn`).
        let watch = rustix::io::dup(std::io::stdout().as_fd()).ok();
        let background = self.background.clone();
        let delivery = background
            .as_ref()
            .and_then(Background::take_events)
            .map(|events| tokio::spawn(deliver(events, self.notifier.clone())));
        let served = conn::serve(Arc::new(self), std::io::stdin(), std::io::stdout(), watch).await;
        // Nothing outlives the connection (invariant 4): the tasks end with it, also
        // when reading failed.
        if let Some(b) = &background {
            b.session.end_background().await;
        }
        if let Some(d) = delivery {
            d.abort();
            let _ = d.await;
        }
        served?;
        Ok(())
    }

    fn call_id(&self, request_id: &str) -> String {
        if request_id.len() <= MAX_REQUEST_ID_IN_CALL_ID {
            format!("mcp-{request_id}")
        } else {
            let n = self.calls.fetch_add(1, Ordering::Relaxed);
            format!("mcp-call-{n}")
        }
    }
}

impl conn::Service for McpServer {
    fn requester(&self) -> Option<conn::Requester> {
        Some(self.requester.clone())
    }

    fn notifier(&self) -> Option<Notifier> {
        self.background.as_ref().map(|_| self.notifier.clone())
    }

    fn initialize(&self, protocol_version: &str) -> Value {
        let capabilities = if self.background.is_some() {
            json!({"tools": {}, "logging": {}})
        } else {
            json!({"tools": {}})
        };
        let mut result = json!({
            "protocolVersion": protocol_version,
            "capabilities": capabilities,
            "serverInfo": {"name": self.name, "version": env!("CARGO_PKG_VERSION")},
        });
        if let (Some(text), Value::Object(map)) = (&self.instructions, &mut result) {
            map.insert("instructions".into(), Value::String(text.clone()));
        }
        result
    }

    fn list_tools(&self) -> Value {
        let tools: Vec<Value> = self
            .routes
            .iter()
            .map(|(tool, route)| {
                json!({
                    "name": tool.as_str(),
                    "description": tool.description(),
                    "inputSchema": route.schema,
                })
            })
            .collect();
        json!({ "tools": tools })
    }

    fn call(
        &self,
        id: &wire::Id,
        name: &str,
        arguments: Map<String, Value>,
        cancel: conn::Cancel,
    ) -> Result<conn::CallFuture, String> {
        let Some((tool, route)) =
            ToolName::from_name(name).and_then(|t| self.routes.get(&t).map(|r| (t, r)))
        else {
            let served: Vec<&str> = self.routes.keys().map(|t| t.as_str()).collect();
            return Err(format!(
                "tools/call params.name: this server has no tool {name:?}; it serves {}",
                served.join(", ")
            ));
        };
        let session = route.session.clone();
        let call_id = self.call_id(&id.to_string());
        let options = self.options.clone();
        Ok(Box::pin(async move {
            // The client cancelled the request or hung up: dropping the call stops the tool's
            // process tree (RUN-10, CMD-6) before the turn ends.
            let mut cancel = cancel;
            let answer = session
                .one_call(
                    &call_id,
                    tool,
                    Value::Object(arguments),
                    &options,
                    KeepMirror::WhenNeeded,
                    cancel.cancelled(),
                )
                .await;
            json!({
                "content": [{"type": "text", "text": answer.to_line().to_string()}],
                "isError": !answer.is_ok(),
            })
        }))
    }
}

/// The three background tools, which one session serves together.
const BACKGROUND_TOOLS: [ToolName; 3] = [
    ToolName::BackgroundCommand,
    ToolName::BackgroundStatus,
    ToolName::BackgroundCancel,
];

fn is_background(tool: ToolName) -> bool {
    BACKGROUND_TOOLS.contains(&tool)
}

/// The level of an event's notice (module docs): a keyword report is a warning; a task that
/// failed, was killed by a signal or timed out, an error; a cancelled one, a notice; a start, a
/// clean exit and a completed group, info.
fn level_of(event: &Event) -> Level {
    match event {
        Event::Started { .. } | Event::GroupCompleted { .. } => Level::Info,
        Event::Report { .. } => Level::Warning,
        Event::Finished { outcome, .. } => level_of_outcome(outcome),
    }
}

fn level_of_outcome(outcome: &Final) -> Level {
    // By the status as the client reads it (`run_command`'s status type is not re-exported
    // by host-shim, and its wire names are the contract anyway).
    let status = serde_json::to_value(outcome.status).unwrap_or(Value::Null);
    match (status.as_str(), outcome.exit_code, &outcome.error) {
        (Some("exited"), Some(0), None) => Level::Info,
        (Some("cancelled"), _, None) => Level::Notice,
        _ => Level::Error,
    }
}

/// An event as the client gets it: `notifications/message` from [`BACKGROUND_LOGGER`], its
/// `data` the event's JSON exactly (`{"event": "started" | "report" | "finished" |
/// "groupCompleted", …}`).
fn notice_of(event: &Event) -> Notice {
    let data = serde_json::to_value(event).unwrap_or_else(|e| {
        json!({"event": "unserializable", "message": format!("an event could not be serialised: {e}")})
    });
    Notice::log(level_of(event), BACKGROUND_LOGGER, data)
}

/// The notice that stands for events dropped while the client did not read.
fn dropped_notice(count: u64) -> Notice {
    Notice::log(
        Level::Warning,
        BACKGROUND_LOGGER,
        json!({
            "event": "dropped",
            "count": count,
            "message": format!(
                "{count} background event(s) were dropped while this client was not reading \
                 its messages (keyword reports first); background_status lists every task and \
                 how it ended"
            ),
        }),
    )
}

/// Which held events go first when the bound is reached: reports (a later report or the end
/// carries the latest output), then starts, then the rest.
fn drop_rank(event: &Event) -> u8 {
    match event {
        Event::Report { .. } => 0,
        Event::Started { .. } => 1,
        Event::Finished { .. } | Event::GroupCompleted { .. } => 2,
    }
}

/// Events waiting for room in the connection's queue, bounded by [`MAX_HELD_EVENTS`] and
/// [`MAX_HELD_BYTES`] (the newest is always kept).
#[derive(Debug, Default)]
struct Held {
    notices: std::collections::VecDeque<(u8, Notice)>,
    bytes: usize,
    dropped: u64,
}

impl Held {
    fn hold(&mut self, event: &Event) {
        let notice = notice_of(event);
        self.bytes += notice.len();
        self.notices.push_back((drop_rank(event), notice));
        while self.notices.len() > 1
            && (self.notices.len() > MAX_HELD_EVENTS || self.bytes > MAX_HELD_BYTES)
        {
            // The oldest of the lowest rank, never the newest.
            let candidates = self.notices.len() - 1;
            let Some(at) = (0..candidates).min_by_key(|&i| (self.notices[i].0, i)) else {
                break;
            };
            if let Some((_, gone)) = self.notices.remove(at) {
                self.bytes -= gone.len();
                self.dropped += 1;
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.notices.is_empty() && self.dropped == 0
    }

    /// Sends what the queue takes, oldest first (the count of dropped ones before them);
    /// false once the connection can take nothing any more.
    fn flush(&mut self, notifier: &Notifier) -> bool {
        loop {
            if self.dropped > 0 {
                match notifier.push(&dropped_notice(self.dropped)) {
                    Pushed::Sent | Pushed::Filtered => self.dropped = 0,
                    Pushed::Full => return true,
                    Pushed::Closed => return false,
                }
            }
            let Some((_, notice)) = self.notices.front() else {
                return true;
            };
            match notifier.push(notice) {
                Pushed::Sent | Pushed::Filtered => {
                    if let Some((_, sent)) = self.notices.pop_front() {
                        self.bytes -= sent.len();
                    }
                }
                Pushed::Full => return true,
                Pushed::Closed => return false,
            }
        }
    }
}

/// Drains a session's background events for the connection's life, each sent as a notice
/// (module docs); held while the client does not read, within bounds. Ends when the stream
/// does; the server aborts it once the tasks were stopped.
async fn deliver(mut events: EventStream, notifier: Notifier) {
    let mut held = Held::default();
    let mut open = true;
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(e) if open => held.hold(&e),
                // The connection is gone: the event has nobody to go to.
                Some(_) => continue,
                None => return,
            },
            () = tokio::time::sleep(RETRY_HELD), if open && !held.is_empty() => {}
        }
        while let Some(e) = events.try_next() {
            if open {
                held.hold(&e);
            }
        }
        if open && !held.flush(&notifier) {
            open = false;
            held = Held::default();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use host_shim::background::Event;
    use host_shim::{AgentConfig, Confirmation, Host, StateStore, ToolName};
    use proptest::prelude::*;
    use serde_json::{Value, json};
    use toolscope::{FolderGrant, PluginRecord};

    use super::McpServer;

    /// A host with the plugin `notes` granted a fresh folder (kept while the temp dir lives).
    fn notes_host() -> (tempfile::TempDir, std::path::PathBuf, Host) {
        let tmp = tempfile::tempdir().unwrap();
        let folder = tmp.path().join("notes");
        std::fs::create_dir(&folder).unwrap();
        let store = StateStore::open(tmp.path().join("state")).unwrap();
        let host = Host::open(store, "alice".into()).unwrap();
        host.update_grants(|g| {
            let mut record = PluginRecord::fully_granted("notes@1", &[]);
            record.folder_grants.insert(FolderGrant {
                path: folder.clone(),
            });
            g.plugins.insert("notes".parse().unwrap(), record);
            Ok(())
        })
        .unwrap();
        (tmp, folder, host)
    }

    #[test]
    fn a_session_lists_only_the_tools_it_can_run() {
        let (_tmp, folder, host) = notes_host();
        let config = AgentConfig::parse(&format!(
            r#"{{"schemaVersion": 2, "systemPrompt": "",
            "tools": [{{"ref": "read"}}, {{"ref": "run"}}], "memory": "session", "mode": "yolo",
            "workspace": {{"kind": "direct", "path": {folder:?}}}}}"#
        ))
        .unwrap();
        let mut server = McpServer::new("agent-exec");
        let skipped = server.add_session(&host.session("notes".parse().unwrap(), config).unwrap());
        assert_eq!(server.tools(), vec![ToolName::Read]);
        assert_eq!(
            skipped,
            vec!["run is not served: run needs a mounted workspace, this one is direct"]
        );
    }

    #[test]
    fn the_background_tools_are_served_together_by_the_session_that_runs_them() {
        let (_tmp, folder, host) = notes_host();
        let session = |kind: &str| {
            let config = AgentConfig::parse(&format!(
                r#"{{"schemaVersion": 2, "systemPrompt": "",
                "tools": [{{"ref": "background_command"}}], "memory": "session", "mode": "yolo",
                "workspace": {{"kind": "{kind}", "path": {folder:?}}}}}"#
            ))
            .unwrap();
            host.session("notes".parse().unwrap(), config).unwrap()
        };
        let background = [
            ToolName::BackgroundCommand,
            ToolName::BackgroundStatus,
            ToolName::BackgroundCancel,
        ];
        // Mounted cannot run background_command: status and cancel are not served either.
        let mut server = McpServer::new("agent-exec");
        let skipped = server.add_session(&session("mounted"));
        assert_eq!(server.tools(), vec![]);
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        // A direct session serves all three and takes its events; a second one serves none.
        let direct = session("direct");
        assert!(server.add_session(&direct).is_empty());
        let mut tools = server.tools();
        tools.sort_by_key(|t| t.as_str());
        let mut want = background.to_vec();
        want.sort_by_key(|t| t.as_str());
        assert_eq!(tools, want);
        assert!(direct.background().is_some());
        let other = session("direct");
        assert!(server.add_session(&other).is_empty());
        assert!(other.background().is_none());
        // A session whose events someone else took is not served: nobody here would hear.
        let taken = session("direct");
        let _events = taken.background_events(|_| {}).unwrap();
        let mut server = McpServer::new("agent-exec");
        let skipped = server.add_session(&taken);
        assert_eq!(server.tools(), vec![]);
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(skipped[0].contains("taken already"), "{skipped:?}");
    }

    #[test]
    fn trust_4_elicitation_and_terminal_show_the_same_rendering() {
        // A forged "Run `ls`? (read-only)" line, ESC sequences, a bidi override and a
        // zero-width space: both channels show the one escaped text, and nothing else of it.
        let argv = [
            "sh",
            "wp.sh",
            "\nRun `ls`? (read-only)\u{1b}[1A\u{202e}\u{200b}",
        ];
        let grants = host_shim::Granted::new()
            .with(host_shim::Grant::Run {
                argv: argv.map(String::from).to_vec(),
                scripts: Vec::new(),
                place: host_shim::Place::Sandbox,
            })
            .with(host_shim::Grant::Write("/home/u/.local/bin".into()))
            .with(host_shim::Grant::Network(host_shim::Network::Internet));
        let q = host_shim::Question::new("sh wp.sh", "the policy asks", &grants).unwrap();
        let form = super::confirmation_form(&q);
        let message = form["message"].as_str().unwrap();
        assert_eq!(message, format!("agent-exec run_command: {}", q.text()));
        let terminal = crate::tty::confirm_prompt(&q);
        let shown: Vec<&str> = terminal
            .lines()
            .filter_map(|l| l.strip_prefix("agent-exec: "))
            .collect();
        assert_eq!(
            shown[..shown.len() - 1].join("\n"),
            q.text(),
            "the terminal shows the rendering line by line"
        );
        assert!(message.contains(
            "- run `sh wp.sh '\\nRun \\u{60}ls\\u{60}? (read-only)\\x1b[1A\\u{202e}\\u{200b}'` in \
             the sandbox"
        ));
        assert!(message.contains("- write to `/home/u/.local/bin` during this call"));
        assert!(message.contains("- network: the command can reach any host on the internet"));
        assert!(!form.to_string().contains("Run `ls`"), "{form}");
        assert!(
            !message
                .chars()
                .any(|c| c != '\n' && (c.is_control() || c == '\u{202e}' || c == '\u{200b}'))
        );
    }

    #[test]
    fn only_accept_with_run_true_is_a_yes() {
        let yes = json!({"action": "accept", "content": {"run": true}});
        assert_eq!(super::confirmation_of(&yes), Confirmation::Yes);
        for (answer, want) in [
            (
                json!({"action": "accept", "content": {"run": false}}),
                Confirmation::No,
            ),
            (
                json!({"action": "accept", "content": {"run": "true"}}),
                Confirmation::No,
            ),
            (json!({"action": "accept"}), Confirmation::No),
            (
                json!({"action": "decline", "content": {"run": true}}),
                Confirmation::No,
            ),
            (json!({"action": "cancel"}), Confirmation::No),
            (
                json!({"action": "ACCEPT", "content": {"run": true}}),
                Confirmation::CannotAsk,
            ),
            (json!({"content": {"run": true}}), Confirmation::CannotAsk),
            (json!(null), Confirmation::CannotAsk),
        ] {
            assert_eq!(super::confirmation_of(&answer), want, "{answer}");
        }
    }

    fn report(n: u32) -> Event {
        use host_shim::background::{Check, Delivery, Origin, Report};
        Event::Report {
            task_id: format!("bg-{n}"),
            origin: Origin {
                task: "t".into(),
                turn: "t".into(),
            },
            delivery: Delivery::Held,
            report: Report {
                keyword: "error".into(),
                line: format!("error {n}"),
                hits: 1,
                output: "x".repeat(1024),
                check: Check::None,
            },
        }
    }

    fn finished(n: u32, bytes: usize) -> Event {
        use host_shim::background::{Delivery, Final, Origin};
        Event::Finished {
            task_id: format!("bg-{n}"),
            origin: Origin {
                task: "t".into(),
                turn: "t".into(),
            },
            delivery: Delivery::Held,
            outcome: Final {
                status: None,
                exit_code: None,
                output: "y".repeat(bytes),
                truncated: false,
                descendants_stopped: 0,
                message: None,
                error: Some("E: x".into()),
                git: Default::default(),
                executable_changes: Vec::new(),
            },
        }
    }

    #[test]
    fn held_events_are_bounded_and_reports_are_dropped_before_ends() {
        // A client that does not read: the held events stay within the count bound; the
        // oldest reports go first, ends are kept, the newest is always kept.
        let mut held = super::Held::default();
        for n in 0..10 {
            held.hold(&finished(n, 1024));
        }
        for n in 10..200 {
            held.hold(&report(n));
        }
        assert_eq!(held.notices.len(), super::MAX_HELD_EVENTS);
        assert_eq!(held.dropped, 200 - super::MAX_HELD_EVENTS as u64);
        let ranks: Vec<u8> = held.notices.iter().map(|(r, _)| *r).collect();
        assert_eq!(ranks.iter().filter(|r| **r == 2).count(), 10, "{ranks:?}");
        // The byte bound: big ends push out everything but the newest ones that fit.
        let mut held = super::Held::default();
        for n in 0..400 {
            held.hold(&finished(n, 100 * 1024));
        }
        assert!(held.bytes <= super::MAX_HELD_BYTES, "{}", held.bytes);
        assert_eq!(
            held.bytes,
            held.notices.iter().map(|(_, n)| n.len()).sum::<usize>()
        );
        assert!(held.notices.len() < super::MAX_HELD_EVENTS);
        assert_eq!(held.dropped as usize + held.notices.len(), 400);
        // One event over the bound on its own is still kept.
        let mut held = super::Held::default();
        held.hold(&finished(0, super::MAX_HELD_BYTES + 1));
        assert_eq!((held.notices.len(), held.dropped), (1, 0));
    }

    #[test]
    fn the_level_of_an_event_follows_how_it_went() {
        use super::Level;
        assert_eq!(super::level_of(&report(1)), Level::Warning);
        assert_eq!(super::level_of(&finished(1, 0)), Level::Error);
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            prop_oneof![
                Just("accept".to_string()),
                Just("decline".to_string()),
                Just("cancel".to_string()),
                Just("run".to_string()),
                ".*"
            ]
            .prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("action".to_string()),
                        Just("content".to_string()),
                        Just("run".to_string()),
                        "[a-z]{1,6}"
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Never an assumed yes: whatever a client answers, it is a yes only when it says
        /// `accept` with `run: true`.
        #[test]
        fn no_answer_but_accept_with_run_true_is_a_yes(answer in any_json()) {
            let said_yes = answer.get("action") == Some(&json!("accept"))
                && answer.pointer("/content/run") == Some(&Value::Bool(true));
            prop_assert_eq!(super::confirmation_of(&answer) == Confirmation::Yes, said_yes);
        }
    }
}
