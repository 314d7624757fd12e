//! The MCP server: the host's tools offered to any Model Context Protocol client over stdio
//! (`agent-exec mcp`): JSON-RPC 2.0, one message per line, MCP revisions 2024-11-05 to
//! 2025-11-25 (the ones with an `initialize` handshake), the `tools` capability only.
//!
//! # How MCP requests map to sessions and turns
//!
//! - **One connection, one set of [`Session`]s.** The server is built from host sessions
//!   ([`McpServer::add_session`]); each tool is routed to the first session whose configuration
//!   offers it (PERM-4) *and* can run it: the exec tools need mode `yolo`, `run` a `mounted`
//!   workspace (PERM-3), `command` a `direct` or `app-private` one (CMD-1). `agent-exec mcp`
//!   without `--config` uses two sessions on the same folder — `direct` for `read`, `write`,
//!   `edit`, `grep` and `command`, `mounted` for `run` — the workspace kinds `agent-exec call`
//!   uses for each tool. With `--config` it uses exactly that one configuration.
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
//! - **`run_command`'s questions** ([`McpAsker`], issue 18). A confirmation is asked with MCP
//!   elicitation — `elicitation/create` with a one-field form (`run`: boolean) — only when the
//!   client declared the `elicitation` capability (form mode) in `initialize`: `accept` with
//!   `run: true` is a yes; `accept` with `false`, `decline` and `cancel` are a no; a client
//!   without the capability, an error answer, or a connection that ends first cannot be asked,
//!   and the call comes back not executed (never an assumed yes). A password is **never**
//!   asked over MCP (the spec forbids collecting secrets with a form): such a call comes back
//!   not executed, its message saying to run it with `agent-exec call run_command` in a
//!   terminal. Cancelling the `tools/call` withdraws its pending elicitation
//!   (`notifications/cancelled` to the client). A `run_command` result — also one not executed
//!   or exiting non-zero — is a result (`isError: false`, with `executed`, `exitCode`,
//!   `message`), as `command`'s non-zero exits are; refusals (`RUN_COMMAND_*`) are tool errors.
//!
//! # Why not `rmcp`
//!
//! This server was built on the official Rust SDK's service loop and stdio transport. Every
//! failure of issue 15 lived in that loop, below any handler we could write: requests in flight
//! are kept in a map by id, so a duplicate id replaced the first's entry and the second's reply
//! was dropped; it never stops reading, and spawns one task per reply waiting to be written,
//! so a client that does not read grows the server without bound; an unparsable line or one
//! whose id it cannot route is dropped unanswered; the last line without `\n` is discarded at
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

use host_shim::{
    Asker, CallOptions, Confirmation, KeepMirror, PasswordReply, Question, Session, ToolName,
};
use serde_json::{Map, Value, json};

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
}

/// `run_command`'s [`Asker`] over one MCP connection (module docs): confirmations by
/// elicitation when the client declared it, passwords never.
#[derive(Clone, Debug)]
pub struct McpAsker {
    requester: conn::Requester,
}

/// The elicitation form of a confirmation: one required boolean.
fn confirmation_form(q: &Question) -> Value {
    json!({
        "message": format!(
            "Run `{}`? {} (agent-exec run_command)",
            q.label, q.reason
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "run": {
                    "type": "boolean",
                    "title": "Run this command",
                    "description": q.label,
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
        "a password is never collected over MCP, and a confirmation only from a client that          supports elicitation; the user can run this call with `agent-exec call run_command`          from a terminal, which asks there"
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
    pub fn add_session(&mut self, session: &Session) -> Vec<String> {
        let mut skipped = Vec::new();
        let registry = session.host().registry();
        for &tool in ToolName::ALL {
            if !session.config().offers(tool) || self.routes.contains_key(&tool) {
                continue;
            }
            if let Some(why) = session.config().unrunnable(tool) {
                skipped.push(format!("{tool} is not served: {why}"));
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
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        // A second descriptor of stdout, polled for the client closing its end while nothing
        // is being written (see `conn`).
        let watch = rustix::io::dup(std::io::stdout().as_fd()).ok();
        conn::serve(Arc::new(self), std::io::stdin(), std::io::stdout(), watch).await?;
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

    fn initialize(&self, protocol_version: &str) -> Value {
        let mut result = json!({
            "protocolVersion": protocol_version,
            "capabilities": {"tools": {}},
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use host_shim::{AgentConfig, Confirmation, Host, StateStore, ToolName};
    use proptest::prelude::*;
    use serde_json::{Value, json};
    use toolscope::{FolderGrant, PluginRecord};

    use super::McpServer;

    #[test]
    fn a_session_lists_only_the_tools_it_can_run() {
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
