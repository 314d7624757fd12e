//! One MCP connection's whole input (`agent-exec mcp`: mcp/wire.rs and mcp/conn.rs).
//!
//! The MCP request handling of `agent-exec mcp` — its framing and validation (`mcp/wire.rs`)
//! and its connection (`mcp/conn.rs`: lifecycle, ids in flight, limits, the server's own
//! requests and notices) — compiled here from the binary crate's source files and driven in
//! process: the input bytes are the client's whole stdin, the tools are a fake service (no
//! session, no process), the output is collected in memory.
//!
//! Properties: never a panic or a hang; every line out is one JSON-RPC 2.0 object; a reply is
//! a result or an error (integer code, non-empty message); and exactly one reply per request
//! and per refused line, with that request's id (`null` when it could not be read) — fewer
//! only by the calls a `notifications/cancelled` in the input stopped.
#![no_main]

// At the crate root, as `conn` reaches `wire` through `super::`.
#[allow(dead_code, unused_imports)]
#[path = "../../crates/agent-exec/src/mcp/conn.rs"]
mod conn;
#[allow(dead_code)]
#[path = "../../crates/agent-exec/src/mcp/wire.rs"]
mod wire;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use conn::{CallFuture, Cancel, Level, Notice, Notifier, Requester, Service};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};
use wire::{Frame, Id, Incoming, LineReader};

struct Fake {
    requester: Requester,
    notifier: Notifier,
}

fn text(s: String) -> Value {
    json!({"content": [{"type": "text", "text": s}], "isError": false})
}

impl Service for Fake {
    fn initialize(&self, protocol_version: &str) -> Value {
        json!({"protocolVersion": protocol_version, "capabilities": {"tools": {}, "logging": {}}})
    }

    fn list_tools(&self) -> Value {
        json!({"tools": [{"name": "echo"}, {"name": "ask"}, {"name": "notify"}, {"name": "slow"}]})
    }

    fn call(
        &self,
        _id: &Id,
        name: &str,
        arguments: Map<String, Value>,
        mut cancel: Cancel,
    ) -> Result<CallFuture, String> {
        match name {
            "echo" => Ok(Box::pin(async move {
                text(Value::Object(arguments).to_string())
            })),
            "ask" => {
                let requester = self.requester.clone();
                Ok(Box::pin(async move {
                    tokio::select! {
                        a = requester.elicit(json!({"message": "Run it?"})) => text(format!("{a:?}")),
                        () = cancel.cancelled() => json!({"cancelled": true}),
                    }
                }))
            }
            "notify" => {
                let notifier = self.notifier.clone();
                Ok(Box::pin(async move {
                    let pushed: Vec<String> = Level::ALL
                        .into_iter()
                        .map(|l| format!("{:?}", notifier.push(&Notice::log(l, "fuzz", json!(1)))))
                        .collect();
                    text(pushed.join(","))
                }))
            }
            "slow" => Ok(Box::pin(async move {
                // Stays in flight across a few dispatcher turns, so a reused id meets it.
                for _ in 0..8 {
                    tokio::task::yield_now().await;
                }
                text("done".into())
            })),
            other => Err(format!("no tool {other:?}")),
        }
    }

    fn requester(&self) -> Option<Requester> {
        Some(self.requester.clone())
    }

    fn notifier(&self) -> Option<Notifier> {
        Some(self.notifier.clone())
    }
}

#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<u8>>>);

impl Write for Collect {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

/// The ids the replies must carry (as JSON text, sorted), and how many cancellations were sent.
fn expected(input: &[u8]) -> (Vec<String>, usize) {
    let mut lines = LineReader::new(input, wire::MAX_LINE_BYTES);
    let mut ids = Vec::new();
    let mut cancels = 0;
    while let Some(frame) = lines.next_frame().expect("reading memory cannot fail") {
        let incoming = match frame {
            Frame::Line(line) => wire::parse(&line),
            Frame::TooLong(prefix) => Incoming::Refused(wire::too_long(&prefix)),
        };
        match incoming {
            Incoming::Request { id, .. } => ids.push(id.to_value().to_string()),
            Incoming::Refused(r) => ids.push(r.id.unwrap_or(Value::Null).to_string()),
            Incoming::Notification { method, .. } if method == "notifications/cancelled" => {
                cancels += 1;
            }
            _ => {}
        }
    }
    ids.sort();
    (ids, cancels)
}

fuzz_target!(|data: &[u8]| {
    let out = Collect::default();
    let service = Arc::new(Fake {
        requester: Requester::new(),
        notifier: Notifier::new(),
    });
    let input = std::io::Cursor::new(data.to_vec());
    let end = runtime()
        .block_on(conn::serve(service, input, out.clone(), None))
        .expect("serving from memory cannot fail");
    assert_eq!(end, conn::End::InputClosed);
    let written = out.0.lock().expect("not poisoned").clone();
    assert!(written.is_empty() || written.ends_with(b"\n"), "a cut line");
    let mut replied = Vec::new();
    for line in written.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let msg: Value = serde_json::from_slice(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(line)));
        assert_eq!(msg["jsonrpc"], "2.0", "{msg}");
        if msg.get("method").is_some() {
            // The server's own request or notification.
            assert!(msg["method"].is_string(), "{msg}");
            continue;
        }
        match (msg.get("result"), msg.get("error")) {
            (Some(_), None) => {}
            (None, Some(e)) => {
                assert!(e["code"].is_i64(), "{msg}");
                assert!(
                    e["message"].as_str().is_some_and(|m| !m.is_empty()),
                    "{msg}"
                );
            }
            _ => panic!("a reply that is neither a result nor an error: {msg}"),
        }
        replied.push(msg.get("id").cloned().unwrap_or(Value::Null).to_string());
    }
    replied.sort();
    let (want, cancels) = expected(data);
    if cancels == 0 {
        assert_eq!(replied, want, "replies do not match the requests");
    } else {
        assert!(replied.len() <= want.len() && replied.len() + cancels >= want.len());
        assert!(
            replied.iter().all(|r| want.contains(r)),
            "a reply to no request"
        );
    }
});
