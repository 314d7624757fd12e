//! Bytes to JSON-RPC messages and back: the framing and validation in front of the MCP server.
//!
//! MCP over stdio is one JSON-RPC message per line, UTF-8, no embedded newlines. Everything a
//! client can get wrong at this level is answered here, so the server above sees only
//! well-formed requests and notifications:
//!
//! - **Framing** ([`LineReader`]): a line is everything up to `\n` (a trailing `\r` and a
//!   leading UTF-8 byte order mark are dropped). A final line without `\n` before end of input
//!   is still a line, so its request is answered. A line longer than [`MAX_LINE_BYTES`] is
//!   answered with an error as soon as the limit is passed and the rest of it is skipped; the
//!   connection keeps serving (closing it would lose the replies of calls in flight). Memory
//!   per line is bounded by the limit, never by what the client sends.
//! - **Parsing** ([`parse`]): invalid JSON or invalid UTF-8 → `-32700`; nesting deeper than
//!   [`MAX_DEPTH`] or a line over the limit → `-32600`; a batch, a non-object, a wrong
//!   `jsonrpc`, a missing or non-string `method`, an `id` that is not a string or an integer
//!   (MCP forbids null) → `-32600`. Each refusal carries the request's `id` when it can be
//!   read, even from a line that is not JSON ([`salvage`]), because a client waits for that id.
//!
//! Nothing here knows MCP methods: what `params` must hold is the server's business.

use std::fmt;
use std::io::{self, BufRead};

use serde_json::{Map, Value};

/// The longest line accepted, in bytes (without its `\n`): 16 MiB, the limit the official MCP
/// SDKs use for one message (rmcp's stdio transport, the streamable HTTP event size), so a
/// message acceptable over HTTP is acceptable here.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The deepest nesting of arrays and objects accepted, counting the message object itself:
/// serde_json's own recursion limit (it refuses the 128th level), checked before parsing so a
/// deeper message gets a reply that says why.
pub const MAX_DEPTH: usize = 127;

/// How much of an over-long line is kept to read its `id` from.
const SALVAGE_PREFIX_BYTES: usize = 64 * 1024;

/// JSON-RPC 2.0 error codes this server answers with.
pub mod code {
    /// Invalid JSON (or invalid UTF-8).
    pub const PARSE_ERROR: i64 = -32700;
    /// Valid JSON that is not an acceptable request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The method exists; its params are wrong.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed (a call task panicked).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Implementation-defined server error (JSON-RPC reserves -32000…-32099): the connection
    /// has as many requests in flight as it takes.
    pub const SERVER_BUSY: i64 = -32000;
}

/// A JSON-RPC request id as MCP allows it: a string or an integer, never null.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    /// An integer that fits `i64`.
    Int(i64),
    /// A larger non-negative integer.
    UInt(u64),
    /// A string.
    Str(String),
}

impl Id {
    /// The id `value` names, if it is one MCP allows.
    pub fn from_value(value: &Value) -> Option<Id> {
        match value {
            Value::String(s) => Some(Id::Str(s.clone())),
            Value::Number(n) => n.as_i64().map(Id::Int).or_else(|| n.as_u64().map(Id::UInt)),
            _ => None,
        }
    }

    /// The id as it goes back on the wire.
    pub fn to_value(&self) -> Value {
        match self {
            Id::Int(n) => Value::from(*n),
            Id::UInt(n) => Value::from(*n),
            Id::Str(s) => Value::String(s.clone()),
        }
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Int(n) => write!(f, "{n}"),
            Id::UInt(n) => write!(f, "{n}"),
            Id::Str(s) => f.write_str(s),
        }
    }
}

/// A message that cannot be served, answered with a JSON-RPC error.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// The request's id when it could be read (`null` on the wire otherwise).
    pub id: Option<Value>,
    /// The JSON-RPC error code ([`code`]).
    pub code: i64,
    /// What was wrong and what to send instead.
    pub message: String,
}

impl Refusal {
    fn new(id: Option<Value>, code: i64, message: impl Into<String>) -> Refusal {
        Refusal {
            id,
            code,
            message: message.into(),
        }
    }
}

/// One line, classified.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// A request: answered exactly once.
    Request {
        /// Its id.
        id: Id,
        /// Its method.
        method: String,
        /// Its params as sent (`None` when absent); the method decides what they must be.
        params: Option<Value>,
    },
    /// A notification: never answered (JSON-RPC), even when it is wrong.
    Notification {
        /// Its method.
        method: String,
        /// Its params as sent.
        params: Option<Value>,
    },
    /// A response or error from the client to one of this server's own requests
    /// (`elicitation/create`): routed to the request waiting for it by `conn`, dropped when
    /// nothing waits for its id.
    Response {
        /// The id it answers (`None` when it is not one MCP allows, e.g. `null`).
        id: Option<Id>,
        /// `result` (`Ok`) or `error` (`Err`), as sent.
        outcome: Result<Value, Value>,
    },
    /// A blank line: nothing to answer.
    Blank,
    /// Answered with an error, nothing else done.
    Refused(Refusal),
}

/// One line out of a [`LineReader`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// A whole line, without its `\n`.
    Line(Vec<u8>),
    /// A line over the limit: its first bytes (to read the id from). The rest is skipped
    /// before the next frame.
    TooLong(Vec<u8>),
}

/// Splits a byte stream into lines of at most `max` bytes without ever holding more than that.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    max: usize,
    /// Skipping the tail of a line already answered as too long.
    skipping: bool,
}

impl<R: BufRead> LineReader<R> {
    /// Lines of `inner`, at most `max` bytes each.
    pub fn new(inner: R, max: usize) -> LineReader<R> {
        LineReader {
            inner,
            max,
            skipping: false,
        }
    }

    /// The next frame; `None` at end of input. A final line without `\n` is returned as a
    /// line (the client's last request still counts).
    pub fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        let mut line = Vec::new();
        loop {
            let available = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                self.skipping = false;
                return Ok((!line.is_empty()).then_some(Frame::Line(line)));
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.unwrap_or(available.len());
            if self.skipping {
                self.inner.consume(take + usize::from(newline.is_some()));
                if newline.is_some() {
                    self.skipping = false;
                }
                continue;
            }
            if line.len() + take > self.max {
                // Answer now, skip the rest later: a client streaming a huge line gets its
                // error while it is still sending.
                let keep = SALVAGE_PREFIX_BYTES.saturating_sub(line.len()).min(take);
                line.extend_from_slice(&available[..keep]);
                line.truncate(SALVAGE_PREFIX_BYTES);
                self.inner.consume(take + usize::from(newline.is_some()));
                self.skipping = newline.is_none();
                return Ok(Some(Frame::TooLong(line)));
            }
            line.extend_from_slice(&available[..take]);
            self.inner.consume(take + usize::from(newline.is_some()));
            if newline.is_some() {
                return Ok(Some(Frame::Line(line)));
            }
        }
    }
}

/// What [`salvage`] learned about a line that may not be JSON.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Salvage {
    /// The top-level `"id"` when it is a string or an integer.
    pub id: Option<Value>,
    /// The deepest nesting of arrays and objects seen outside strings.
    pub depth: usize,
}

/// Reads what it can of a line without parsing it: the deepest nesting, and the top-level
/// `"id"` member of an object. Tolerant by design (unterminated strings, invalid UTF-8, cut-off
/// input), so an error reply can name the request it answers. Never panics.
pub fn salvage(line: &[u8]) -> Salvage {
    let mut out = Salvage::default();
    let mut depth = 0usize;
    // At depth 1 inside the top-level object: the last key read, and whether the next token is
    // a key (after `{` or `,`).
    let mut top_object = false;
    let mut want_key = false;
    let mut key: Option<&[u8]> = None;
    let mut i = 0;
    while i < line.len() {
        let b = line[i];
        match b {
            b'"' => {
                let end = string_end(line, i);
                let token = &line[i..end];
                if depth == 1 && top_object {
                    if want_key {
                        key = Some(&token[1..token.len().saturating_sub(1).max(1)]);
                        want_key = false;
                    } else if key == Some(b"id".as_slice()) {
                        out.id = id_token(token);
                        key = None;
                    }
                }
                i = end;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                out.depth = out.depth.max(depth);
                if depth == 1 {
                    top_object = b == b'{';
                    want_key = top_object;
                } else if depth == 2 {
                    key = None;
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    // The message ended; what follows is not part of it.
                    top_object = false;
                }
            }
            b',' if depth == 1 => {
                want_key = top_object;
                key = None;
            }
            b':' | b',' => {}
            b if b.is_ascii_whitespace() => {}
            _ => {
                // A bare scalar (number, true, false, null, or garbage): up to a delimiter.
                let end = line[i..]
                    .iter()
                    .position(|c| {
                        matches!(c, b',' | b'}' | b']' | b':' | b'"' | b'{' | b'[')
                            || c.is_ascii_whitespace()
                    })
                    .map_or(line.len(), |p| i + p);
                if depth == 1 && top_object && !want_key && key == Some(b"id".as_slice()) {
                    out.id = id_token(&line[i..end]);
                    key = None;
                }
                i = end.max(i + 1);
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The index just past the string starting at `start` (a `"`), or the end of the line.
fn string_end(line: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < line.len() {
        match line[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    line.len()
}

/// The id a token spells, if it is a string or an integer.
fn id_token(token: &[u8]) -> Option<Value> {
    let value: Value = serde_json::from_slice(token).ok()?;
    Id::from_value(&value).map(|_| value)
}

/// Classifies one line (see the module docs for what is refused and with which code).
pub fn parse(line: &[u8]) -> Incoming {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Incoming::Blank;
    }
    let found = salvage(line);
    if found.depth > MAX_DEPTH {
        return Incoming::Refused(Refusal::new(
            found.id,
            code::INVALID_REQUEST,
            format!(
                "Invalid Request: the message nests arrays and objects {} levels deep; at most \
                 {MAX_DEPTH} are accepted",
                found.depth
            ),
        ));
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            let what = match std::str::from_utf8(line) {
                Err(bad) => format!(
                    "the message is not valid UTF-8 (byte {} is not)",
                    bad.valid_up_to() + 1
                ),
                Ok(_) => format!("the message is not valid JSON ({e})"),
            };
            return Incoming::Refused(Refusal::new(
                found.id,
                code::PARSE_ERROR,
                format!("Parse error: {what}; send one JSON-RPC message per line"),
            ));
        }
    };
    classify(value)
}

/// The refusal for a line over [`MAX_LINE_BYTES`], from its first bytes.
pub fn too_long(prefix: &[u8]) -> Refusal {
    Refusal::new(
        salvage(prefix).id,
        code::INVALID_REQUEST,
        format!(
            "Invalid Request: the message is longer than {MAX_LINE_BYTES} bytes and was skipped; \
             send less in one message"
        ),
    )
}

fn classify(value: Value) -> Incoming {
    let mut obj = match value {
        Value::Object(obj) => obj,
        Value::Array(items) => {
            let what = if items.is_empty() {
                "an empty batch"
            } else {
                "a batch; MCP has no batches since 2025-06-18"
            };
            return Incoming::Refused(Refusal::new(
                None,
                code::INVALID_REQUEST,
                format!("Invalid Request: the message is {what}; send one request object per line"),
            ));
        }
        other => {
            return Incoming::Refused(Refusal::new(
                None,
                code::INVALID_REQUEST,
                format!(
                    "Invalid Request: the message is {}, not a JSON-RPC object; send \
                     {{\"jsonrpc\": \"2.0\", \"id\": …, \"method\": …, \"params\": {{…}}}}",
                    kind(&other)
                ),
            ));
        }
    };
    let raw_id = obj.remove("id");
    let id = raw_id.as_ref().and_then(Id::from_value);
    let echo = id.as_ref().map(Id::to_value);
    let refuse = |message: String| {
        Incoming::Refused(Refusal::new(
            echo.clone(),
            code::INVALID_REQUEST,
            format!("Invalid Request: {message}"),
        ))
    };
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return refuse("\"jsonrpc\" must be \"2.0\"".into());
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(other) => {
            return refuse(format!("\"method\" must be a string, not {}", kind(&other)));
        }
        None if obj.contains_key("result") || obj.contains_key("error") => {
            let outcome = match obj.remove("result") {
                Some(result) => Ok(result),
                None => Err(obj.remove("error").unwrap_or(Value::Null)),
            };
            return Incoming::Response { id, outcome };
        }
        None => {
            return refuse(
                "the message has no \"method\"; a request needs \"id\" and \"method\"".into(),
            );
        }
    };
    let params = obj.remove("params");
    match (raw_id, id) {
        (None, _) => Incoming::Notification { method, params },
        (Some(_), Some(id)) => Incoming::Request { id, method, params },
        (Some(bad), None) => refuse(format!(
            "\"id\" must be a string or an integer, not {}",
            kind(&bad)
        )),
    }
}

/// How a value is named in messages: "a string", "an array", …
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A result reply, as one line.
pub fn result_line(id: &Id, result: Value) -> Vec<u8> {
    let mut reply = Map::new();
    reply.insert("jsonrpc".into(), Value::String("2.0".into()));
    reply.insert("id".into(), id.to_value());
    reply.insert("result".into(), result);
    line_of(&Value::Object(reply))
}

/// A request of the server to the client, as one line.
pub fn request_line(id: &Id, method: &str, params: Value) -> Vec<u8> {
    line_of(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.to_value(),
        "method": method,
        "params": params,
    }))
}

/// A notification of the server to the client, as one line.
pub fn notification_line(method: &str, params: Value) -> Vec<u8> {
    line_of(&serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

/// An error reply, as one line (`id: null` when the request's id is unknown).
pub fn error_line(refusal: &Refusal) -> Vec<u8> {
    line_of(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": refusal.id.clone().unwrap_or(Value::Null),
        "error": {"code": refusal.code, "message": refusal.message},
    }))
}

fn line_of(value: &Value) -> Vec<u8> {
    // Serialising a `Value` cannot fail (its keys are strings); an empty line would still be
    // better than none.
    let mut out = serde_json::to_vec(value).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// `line` → what `parse` makes of it, written as the reply it gets (or a short tag).
    fn check(line: &str, want: Value) {
        let got = match parse(line.as_bytes()) {
            Incoming::Request { id, method, .. } => json!({"request": method, "id": id.to_value()}),
            Incoming::Notification { method, .. } => json!({"notification": method}),
            Incoming::Response { id, outcome } => json!({
                "response": id.map(|i| i.to_value()),
                "ok": outcome.is_ok(),
            }),
            Incoming::Blank => json!("blank"),
            Incoming::Refused(r) => json!({"code": r.code, "id": r.id}),
        };
        assert_eq!(got, want, "{line}");
    }

    #[test]
    fn lines_are_classified_with_the_json_rpc_code_and_the_id_when_readable() {
        check(
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            json!({"request": "ping", "id": 1}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#,
            json!({"request": "ping", "id": "a"}),
        );
        check(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            json!({"notification": "notifications/initialized"}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            json!({"response": 1, "ok": true}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":"s-2","error":{"code":-32601,"message":"no"}}"#,
            json!({"response": "s-2", "ok": false}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"?"}}"#,
            json!({"response": null, "ok": false}),
        );
        check("   ", json!("blank"));
        check("\r", json!("blank"));
        // Not JSON, but the id is readable.
        check(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#,
            json!({"code": -32700, "id": 7}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":"x y","method":}"#,
            json!({"code": -32700, "id": "x y"}),
        );
        check(
            r#"{"id": 8 , "jsonrpc":"2.0" "method":"ping"}"#,
            json!({"code": -32700, "id": 8}),
        );
        check("not json at all", json!({"code": -32700, "id": null}));
        // An id nested deeper is not the request's.
        check(
            r#"{"params":{"id":3},"method":"#,
            json!({"code": -32700, "id": null}),
        );
        // Valid JSON, not a request.
        check("[]", json!({"code": -32600, "id": null}));
        check(
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            json!({"code": -32600, "id": null}),
        );
        check("5", json!({"code": -32600, "id": null}));
        check(
            r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#,
            json!({"code": -32600, "id": 2}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":2,"method":5}"#,
            json!({"code": -32600, "id": 2}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":2}"#,
            json!({"code": -32600, "id": 2}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            json!({"code": -32600, "id": null}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            json!({"code": -32600, "id": null}),
        );
        check(
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            json!({"code": -32600, "id": null}),
        );
        // A byte order mark and a carriage return are framing, not content.
        check(
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\r",
            json!({"request": "ping", "id": 3}),
        );
    }

    fn refusal(line: &[u8]) -> Refusal {
        match parse(line) {
            Incoming::Refused(r) => r,
            other => panic!("accepted: {other:?}"),
        }
    }

    #[test]
    fn invalid_utf8_inside_a_string_is_a_parse_error_that_keeps_the_id() {
        let line =
            b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}";
        let r = refusal(line);
        assert_eq!((r.code, r.id), (code::PARSE_ERROR, Some(json!(4))));
        assert!(
            r.message.contains("not valid UTF-8 (byte 56"),
            "{}",
            r.message
        );
        // A lone surrogate escape is not a string either.
        let line = br#"{"jsonrpc":"2.0","id":"s","method":"ping","params":{"x":"\ud800"}}"#;
        let r = refusal(line);
        assert_eq!((r.code, r.id), (code::PARSE_ERROR, Some(json!("s"))));
    }

    fn nested(depth: usize, id: u32) -> String {
        // The message object is level 1, params level 2, then `depth - 2` arrays.
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"x":{}0{}}}}}"#,
            "[".repeat(depth - 2),
            "]".repeat(depth - 2)
        )
    }

    #[test]
    fn nesting_is_accepted_up_to_the_limit_and_refused_with_the_id_beyond() {
        assert!(matches!(
            parse(nested(MAX_DEPTH, 1).as_bytes()),
            Incoming::Request { .. }
        ));
        let r = refusal(nested(MAX_DEPTH + 1, 2).as_bytes());
        assert_eq!((r.code, r.id), (code::INVALID_REQUEST, Some(json!(2))));
        assert!(
            r.message.contains("128 levels deep; at most 127"),
            "{}",
            r.message
        );
        let deep = format!(r#"{{"id":3,"x":{}"#, "[".repeat(100_000));
        let r = refusal(deep.as_bytes());
        assert_eq!((r.code, r.id), (code::INVALID_REQUEST, Some(json!(3))));
    }

    fn frames(input: &[u8], max: usize, chunk: usize) -> Vec<Frame> {
        let reader = std::io::BufReader::with_capacity(chunk.max(1), input);
        let mut lines = LineReader::new(reader, max);
        let mut out = Vec::new();
        while let Some(f) = lines.next_frame().unwrap() {
            out.push(f);
        }
        out
    }

    #[test]
    fn a_final_line_without_newline_is_a_line_and_a_long_line_is_skipped_to_its_end() {
        assert_eq!(
            frames(b"a\nbc", 10, 3),
            [Frame::Line(b"a".to_vec()), Frame::Line(b"bc".to_vec())]
        );
        assert_eq!(
            frames(b"0123456789x\nok\n", 10, 4),
            [
                Frame::TooLong(b"0123456789x".to_vec()),
                Frame::Line(b"ok".to_vec())
            ]
        );
        // Exactly the limit is fine; an over-long final line is still answered.
        assert_eq!(
            frames(b"0123456789\n", 10, 64),
            [Frame::Line(b"0123456789".to_vec())]
        );
        assert_eq!(
            frames(b"0123456789xyz", 10, 64),
            [Frame::TooLong(b"0123456789xyz".to_vec())]
        );
        assert_eq!(frames(b"", 10, 4), []);
        assert_eq!(frames(b"\n", 10, 4), [Frame::Line(Vec::new())]);
    }

    /// Checks `got` against the lines of `input` split the obvious way: a line within `max`
    /// comes out whole; a longer one as `TooLong` holding the start of it, more than `max`
    /// bytes of it (or all), and never more than the salvage prefix.
    fn check_frames(input: &[u8], max: usize, got: &[Frame]) -> Result<(), TestCaseError> {
        let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        if lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        prop_assert_eq!(got.len(), lines.len());
        for (frame, line) in got.iter().zip(lines) {
            match frame {
                Frame::Line(l) => {
                    prop_assert!(line.len() <= max);
                    prop_assert_eq!(l.as_slice(), line);
                }
                Frame::TooLong(prefix) => {
                    prop_assert!(line.len() > max);
                    prop_assert!(line.starts_with(prefix));
                    prop_assert!(prefix.len() > max || prefix.len() == line.len());
                    prop_assert!(prefix.len() <= SALVAGE_PREFIX_BYTES);
                }
            }
        }
        Ok(())
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{0,3}|id", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn depth_of(value: &Value) -> usize {
        match value {
            Value::Array(items) => 1 + items.iter().map(depth_of).max().unwrap_or(0),
            Value::Object(map) => 1 + map.values().map(depth_of).max().unwrap_or(0),
            _ => 0,
        }
    }

    proptest! {
        #[test]
        fn the_line_reader_splits_like_split_at_any_read_size(
            input in prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'a'), any::<u8>()], 0..200),
            max in 1usize..20,
            chunk in 1usize..16,
        ) {
            check_frames(&input, max, &frames(&input, max, chunk))?;
        }

        #[test]
        fn salvage_reads_the_id_and_depth_that_serde_reads(
            body in prop::collection::btree_map("[a-z]{1,4}", json_value(), 0..4),
            id in prop_oneof![any::<i64>().prop_map(Value::from), "\\PC{0,12}".prop_map(Value::String), json_value()],
        ) {
            // serde_json's map is sorted: keys before and after "id" put it anywhere.
            let mut msg: Map<String, Value> = body.into_iter().filter(|(k, _)| k != "id").collect();
            msg.insert("id".into(), id.clone());
            let msg = Value::Object(msg);
            let text = serde_json::to_vec(&msg).unwrap();
            let found = salvage(&text);
            let want_id = Id::from_value(&id).map(|_| id.clone());
            prop_assert_eq!(found.id, want_id);
            prop_assert_eq!(found.depth, depth_of(&msg));
            // The limit is exactly serde_json's: what salvage lets through, serde parses.
            let parsed = serde_json::from_slice::<Value>(&text).is_ok();
            prop_assert_eq!(parsed, found.depth <= MAX_DEPTH);
        }

        #[test]
        fn a_message_is_refused_for_depth_exactly_when_serde_would_refuse_it(
            depth in 2usize..200,
            id in any::<i32>(),
        ) {
            let line = nested(depth, 0).replace("\"id\":0", &format!("\"id\":{id}"));
            let parsed = serde_json::from_str::<Value>(&line).is_ok();
            match parse(line.as_bytes()) {
                Incoming::Request { .. } => prop_assert!(parsed && depth <= MAX_DEPTH),
                Incoming::Refused(r) => {
                    prop_assert!(!parsed && depth > MAX_DEPTH);
                    prop_assert_eq!((r.code, r.id), (code::INVALID_REQUEST, Some(Value::from(id))));
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }

        #[test]
        fn any_bytes_get_a_classification_and_a_cut_message_keeps_its_id(
            bytes in prop::collection::vec(any::<u8>(), 0..300),
            id in any::<u32>(),
            cut in 0usize..40,
        ) {
            // Never panics on anything.
            let _ = parse(&bytes);
            let _ = salvage(&bytes);
            // A request cut anywhere after its id still names it.
            let full = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read"}}}}"#);
            let keep = full.find("\"method\"").unwrap() + cut.min(full.len() - full.find("\"method\"").unwrap());
            let refusal = too_long(&full.as_bytes()[..keep]);
            prop_assert_eq!(refusal.id, Some(Value::from(id)));
        }
    }

    #[test]
    fn serde_refuses_exactly_one_level_more_than_the_limit() {
        // Pins MAX_DEPTH to the parser this module hands valid lines to.
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(serde_json::from_str::<Value>(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(serde_json::from_str::<Value>(&deep).is_err());
    }
}
