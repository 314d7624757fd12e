//! The MCP server: the host's tools offered to any Model Context Protocol client over stdio
//! (`agent-exec mcp`), built on the official Rust SDK (`rmcp`, server side only).
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
//!   [`Registry`](crate::Registry).
//! - **One `tools/call`, one [`Turn`](crate::Turn).** MCP has no notion of an agent turn, so each
//!   call is a one-call turn, like `agent-exec call`: a fresh `ToolScope` (TS-1, TS-2), the
//!   grants checked before and watched during the call (TS-3), and for `mounted` a mirror taken
//!   at the start and written back only when the call succeeded (RUN-11; the mirror's fate is in
//!   the result's `"mirror"`). A host that knows its agent's turns embeds this crate and calls
//!   [`Session::begin_turn`] itself.
//! - **callId** is `mcp-<request id>` (the JSON-RPC id of the `tools/call`), or `mcp-call-<n>`
//!   when that id is too long to be a callId.
//! - **Results.** Success: a text block holding the tool's JSON result with `"ok": true` merged
//!   in — the line `agent-exec call` prints — also given as `structuredContent`. A failed call is
//!   an MCP *tool error* (`isError: true`) whose content is the error object
//!   `{"ok": false, "code": "AGENT_EXEC_…", "message": "…"}`, so the agent reads what went wrong
//!   and what to do instead. Only an unknown tool name is a protocol error (invalid params).
//! - **Cancellation.** `notifications/cancelled` for a running call, or the client closing the
//!   connection, drops the call: the tool's process tree is stopped (RUN-10, CMD-6) and the turn
//!   ends as failed.
//! - **Approvals.** `command`'s `extraPaths` need the user's approval for the call (CMD-3); this
//!   server has no channel to ask the user, so it asks the host's approver, which for
//!   `agent-exec mcp` approves nothing: calls with extra paths are refused with a permission
//!   error naming the path.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value};
use toolscope::{ErrorCode, ToolError};

use crate::config::{ToolName, WorkspaceKind};
use crate::host::Session;
use crate::registry::CallOptions;

/// The longest MCP request id used verbatim in a callId (toolscope allows 256 bytes).
const MAX_REQUEST_ID_IN_CALL_ID: usize = 200;

/// Why the MCP server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The client never completed the MCP handshake.
    #[error("the MCP client did not complete the handshake: {0}")]
    Handshake(String),
    /// The server's task ended abnormally.
    #[error("the MCP server stopped unexpectedly: {0}")]
    Stopped(String),
}

/// A session's tool that this server serves.
#[derive(Clone, Debug)]
struct Route {
    session: Session,
    tool: Tool,
}

/// An MCP server offering the tools of one or more host [`Session`]s (see the module docs for
/// how requests map to sessions and turns).
///
/// ```
/// use host_shim::{AgentConfig, Host, McpServer, StateStore, ToolName};
/// use toolscope::{FolderGrant, PluginRecord};
///
/// let tmp = tempfile::tempdir().unwrap();
/// let folder = tmp.path().join("notes");
/// std::fs::create_dir(&folder).unwrap();
/// let host = Host::open(StateStore::open(tmp.path().join("state")).unwrap(), "alice".into()).unwrap();
/// host.update_grants(|g| {
///     let mut record = PluginRecord::fully_granted("notes@1", &[]);
///     record.folder_grants.insert(FolderGrant { path: folder.clone() });
///     g.plugins.insert("notes".into(), record);
///     Ok(())
/// }).unwrap();
/// let config = AgentConfig::parse(&format!(r#"{{"schemaVersion": 2, "systemPrompt": "",
///     "tools": [{{"ref": "read"}}, {{"ref": "run"}}], "memory": "session", "mode": "yolo",
///     "workspace": {{"kind": "direct", "path": {:?}}}}}"#, folder)).unwrap();
///
/// let mut server = McpServer::new("agent-exec");
/// let skipped = server.add_session(&host.session("notes".into(), config).unwrap());
/// assert_eq!(server.tools(), vec![ToolName::Read]);
/// assert!(skipped[0].contains("run needs a mounted workspace"));
/// // server.serve_stdio().await serves them until the client hangs up.
/// ```
#[derive(Clone, Debug)]
pub struct McpServer {
    name: String,
    instructions: Option<String>,
    routes: BTreeMap<ToolName, Route>,
    calls: Arc<AtomicU64>,
}

/// Why `session` cannot serve `tool`, if it cannot (PERM-3, PERM-4, CMD-1).
fn unservable(session: &Session, tool: ToolName) -> Option<String> {
    let config = session.config();
    let kind = config.workspace.kind;
    if tool.is_exec() && !config.is_yolo() {
        return Some(format!("{tool} needs \"mode\": \"yolo\""));
    }
    match (tool, kind) {
        (ToolName::Run, WorkspaceKind::Mounted) => None,
        (ToolName::Run, _) => Some(format!("run needs a mounted workspace, this one is {kind}")),
        (ToolName::Command, WorkspaceKind::Mounted) => {
            Some("command needs a direct or app-private workspace, this one is mounted".into())
        }
        _ => None,
    }
}

fn description(tool: ToolName) -> &'static str {
    match tool {
        ToolName::Read => {
            "Read a text file of the workspace. Arguments {path, offset?, limit?} (offset and \
             limit in lines); result {content, totalLines, truncated}. Symlinks and hard-linked \
             files are refused."
        }
        ToolName::Write => {
            "Create or replace a file of the workspace atomically. Arguments {path, content}; \
             result {bytesWritten}."
        }
        ToolName::Edit => {
            "Replace text in a file of the workspace. Arguments {path, oldString, newString, \
             replaceAll?}; without replaceAll the old string must occur exactly once. Result \
             {replacements}."
        }
        ToolName::Grep => {
            "Search the workspace's text files with a regular expression. Arguments {pattern, \
             path?, glob?, maxResults?}; result {matches: [{path, line, text}], truncated}. \
             truncated: true means some file was too large or unreadable, not that nothing \
             matched."
        }
        ToolName::Run => {
            "Run awk (-f script file), wc, sort or diff on files of the workspace, in a \
             deny-default sandbox on a mirror of it that is written back when the call \
             succeeds. Arguments {program, args, cwdRelative?, timeoutMs?}; result {program, \
             exitCode, stdout, stderr, truncated}."
        }
        ToolName::Command => {
            "Run one /bin/sh -c command line in the workspace, in a deny-default sandbox (the \
             workspace and a private temp dir are writable). Arguments {command, cwd?, \
             extraPaths?, timeoutMs?}; result {stdout, stderr, exitCode, status, truncated, \
             partialExecution, descendantsStopped}. extraPaths need the user's approval per \
             call."
        }
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

fn error_value(err: &ToolError) -> Value {
    serde_json::to_value(err).unwrap_or_else(
        |_| serde_json::json!({"ok": false, "code": err.code(), "message": err.message()}),
    )
}

impl McpServer {
    /// A server that calls itself `name` in the MCP handshake and serves no tools yet.
    pub fn new(name: impl Into<String>) -> McpServer {
        McpServer {
            name: name.into(),
            instructions: None,
            routes: BTreeMap::new(),
            calls: Arc::new(AtomicU64::new(0)),
        }
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
            if let Some(why) = unservable(session, tool) {
                skipped.push(format!("{tool} is not served: {why}"));
                continue;
            }
            let Some(handler) = registry.get(tool) else {
                skipped.push(format!(
                    "{tool} is not served: this host has no {tool} tool"
                ));
                continue;
            };
            let spec = Tool::new(
                tool.as_str(),
                description(tool),
                schema_object(handler.input_schema()),
            );
            self.routes.insert(
                tool,
                Route {
                    session: session.clone(),
                    tool: spec,
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

    /// Serves MCP on this process's stdin and stdout until the client closes the connection.
    /// Needs a tokio runtime with IO and time enabled.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        self.serve(rmcp::transport::stdio()).await
    }

    /// Serves MCP on any transport `rmcp` accepts, e.g. an `(AsyncRead, AsyncWrite)` pair.
    pub async fn serve<T, E, A>(self, transport: T) -> Result<(), McpError>
    where
        T: rmcp::transport::IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let running = ServiceExt::serve(self, transport)
            .await
            .map_err(|e| McpError::Handshake(e.to_string()))?;
        running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| McpError::Stopped(e.to_string()))
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

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.name.clone(),
                env!("CARGO_PKG_VERSION"),
            ));
        match &self.instructions {
            Some(text) => info.with_instructions(text.clone()),
            None => info,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.routes.values().map(|r| r.tool.clone()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some((tool, route)) =
            ToolName::from_name(&request.name).and_then(|t| self.routes.get(&t).map(|r| (t, r)))
        else {
            let served: Vec<&str> = self.routes.keys().map(|t| t.as_str()).collect();
            return Err(ErrorData::invalid_params(
                Cow::Owned(format!(
                    "this server has no tool {:?}; it serves {}",
                    request.name,
                    served.join(", ")
                )),
                None,
            ));
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let call_id = self.call_id(&context.id.to_string());
        let outcome = one_call_turn(&route.session, &call_id, tool, args, &context).await;
        Ok(match outcome {
            Ok(value) => CallToolResult::structured(value),
            Err(value) => CallToolResult::structured_error(value),
        }
        .into())
    }
}

/// One `tools/call` as a one-call turn. `Ok` is the result with `"ok": true` merged in (and the
/// mirror's fate for `mounted`), `Err` the error object.
async fn one_call_turn(
    session: &Session,
    call_id: &str,
    tool: ToolName,
    args: Value,
    context: &RequestContext<RoleServer>,
) -> Result<Value, Value> {
    let turn = session.begin_turn().map_err(|e| error_value(&e))?;
    let options = CallOptions::default();
    let result = tokio::select! {
        r = turn.call(call_id, tool.as_str(), args, &options) => r,
        // The client cancelled the request or hung up: dropping the call stops the tool's
        // process tree (RUN-10, CMD-6) before the turn ends below.
        () = context.ct.cancelled() => Err(ToolError::new(
            ErrorCode::ExecCancelled,
            "the MCP client cancelled this call; send it again if it is still wanted",
        )),
    };
    let report = turn.finish(result.is_ok(), false);
    let line = crate::outcome::turn_line(result, &report);
    if crate::outcome::line_is_ok(&line) {
        Ok(line)
    } else {
        Err(line)
    }
}
