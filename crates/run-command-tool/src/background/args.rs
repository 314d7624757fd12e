//! `background_command`'s arguments (BG-1, BG-3, BG-4, BG-9): `run_command`'s, plus
//! `objective`, `next`, `timeout_min`, `keywords` and `group`, validated before anything runs.
//!
//! **Owns:** the JSON shape, its limits and their messages. **Refuses to know:** what the
//! arguments mean to the decision (argv-policy's) or to the monitor (module `monitor`).

use serde_json::{Map, Value, json};
use toolscope::{ErrorCode, ToolError};

use super::monitor::Keywords;
use crate::RunCommandArgs;

/// `timeout_min` when none is given, and its upper bound (BG-3).
pub const MAX_TIMEOUT_MIN: u32 = 60;
/// The longest `objective` or `next`, in bytes.
pub const MAX_NOTE_BYTES: usize = 4096;
/// The longest `group` name, in bytes.
pub const MAX_GROUP_BYTES: usize = 64;

/// The fields `background_command` adds to `run_command`'s.
const OWN: [&str; 5] = ["objective", "next", "timeout_min", "keywords", "group"];

/// A validated `background_command` call.
#[derive(Debug, Clone)]
pub struct BackgroundArgs {
    /// What runs, checked exactly as `run_command` checks it.
    pub command: RunCommandArgs,
    /// Why the agent started it: carried into the group's completion (BG-9).
    pub objective: Option<String>,
    /// What to do once it is done: carried into the group's completion (BG-9).
    pub next: Option<String>,
    /// Minutes until the task is stopped, 1–60 (BG-3).
    pub timeout_min: u32,
    pub(crate) keywords: Keywords,
    /// Legs given the same group name in one session form one group (BG-9) — for front ends
    /// without turns of their own (an MCP client); without it the host's turn decides.
    pub group: Option<String>,
}

impl BackgroundArgs {
    /// `argv` with the defaults (60 minutes, the default keywords, no notes, no group).
    pub fn new<I, S>(argv: I) -> BackgroundArgs
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        BackgroundArgs {
            command: RunCommandArgs::new(argv),
            objective: None,
            next: None,
            timeout_min: MAX_TIMEOUT_MIN,
            keywords: Keywords::defaults(),
            group: None,
        }
    }

    /// Replaces the keywords (BG-4). The same rules as the JSON field.
    ///
    /// # Errors
    /// `RUN_COMMAND_ARGUMENTS_INVALID` with what to send instead.
    pub fn with_keywords(mut self, keywords: &[String]) -> Result<BackgroundArgs, ToolError> {
        self.keywords = Keywords::parse(Some(keywords)).map_err(invalid)?;
        Ok(self)
    }

    /// The keywords the monitor looks for, lowercase.
    pub fn keywords(&self) -> &[String] {
        self.keywords.as_slice()
    }

    /// Parses and validates one call's JSON object.
    ///
    /// # Errors
    /// `RUN_COMMAND_ARGUMENTS_INVALID` (or the code of `run_command`'s own refusal of its part)
    /// with a message that says what to send instead.
    pub fn from_json(value: &Value) -> Result<BackgroundArgs, ToolError> {
        let Value::Object(object) = value else {
            return Err(invalid(
                "the arguments must be a JSON object like {\"argv\": [\"npm\", \"run\", \"dev\"], \
                 \"timeout_min\": 30}",
            ));
        };
        let mut command: Map<String, Value> = Map::new();
        let mut own: Map<String, Value> = Map::new();
        for (k, v) in object {
            if OWN.contains(&k.as_str()) {
                own.insert(k.clone(), v.clone());
            } else {
                command.insert(k.clone(), v.clone());
            }
        }
        let command =
            RunCommandArgs::from_json(&Value::Object(command).to_string()).map_err(|r| {
                let code = r
                    .code
                    .as_str()
                    .parse::<ErrorCode>()
                    .unwrap_or(ErrorCode::RunCommandArgumentsInvalid);
                ToolError::new(code, r.message.replace("run_command", "background_command"))
            })?;
        let note = |name: &str| -> Result<Option<String>, ToolError> {
            match own.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.len() <= MAX_NOTE_BYTES => Ok(Some(s.clone())),
                Some(Value::String(_)) => Err(invalid(format!(
                    "`{name}` is longer than {MAX_NOTE_BYTES} bytes; say it in a sentence or two"
                ))),
                Some(_) => Err(invalid(format!("`{name}` must be a string"))),
            }
        };
        let objective = note("objective")?;
        let next = note("next")?;
        let timeout_min = match own.get("timeout_min") {
            None | Some(Value::Null) => MAX_TIMEOUT_MIN,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=60) => n as u32,
                _ => {
                    return Err(invalid(format!(
                        "`timeout_min` must be a whole number of minutes from 1 to \
                         {MAX_TIMEOUT_MIN} (got {v}); omit it for {MAX_TIMEOUT_MIN}"
                    )));
                }
            },
        };
        let keywords = match own.get("keywords") {
            None | Some(Value::Null) => Keywords::defaults(),
            Some(Value::Array(items)) => {
                let mut words = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::String(s) => words.push(s.clone()),
                        _ => return Err(invalid("every entry of `keywords` must be a string")),
                    }
                }
                Keywords::parse(Some(&words)).map_err(invalid)?
            }
            Some(_) => {
                return Err(invalid(
                    "`keywords` must be a list of strings, e.g. [\"error\", \"failed\"]; omit \
                     it for the defaults",
                ));
            }
        };
        let group = match own.get("group") {
            None | Some(Value::Null) => None,
            Some(Value::String(g)) if valid_group(g) => Some(g.clone()),
            Some(_) => {
                return Err(invalid(format!(
                    "`group` must be 1–{MAX_GROUP_BYTES} letters, digits, `.`, `_` or `-`; \
                     legs given the same group form one group"
                )));
            }
        };
        Ok(BackgroundArgs {
            command,
            objective,
            next,
            timeout_min,
            keywords,
            group,
        })
    }
}

fn valid_group(g: &str) -> bool {
    !g.is_empty()
        && g.len() <= MAX_GROUP_BYTES
        && g.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::RunCommandArgumentsInvalid, message)
}

/// The JSON Schema of `background_command`'s arguments: `run_command`'s with its own fields.
pub fn background_input_schema() -> Value {
    let mut schema = crate::types::input_schema();
    schema["title"] = json!("BackgroundCommandArgs");
    let defaults: Vec<&str> = super::monitor::DEFAULT_KEYWORDS.to_vec();
    if let Some(props) = schema["properties"].as_object_mut() {
        props.insert(
            "objective".into(),
            json!({"description": "Why this runs; given back with the reports when the group \
                                   is done.", "type": "string", "maxLength": MAX_NOTE_BYTES}),
        );
        props.insert(
            "next".into(),
            json!({"description": "What to do once it is done; given back with the reports.",
                   "type": "string", "maxLength": MAX_NOTE_BYTES}),
        );
        props.insert(
            "timeout_min".into(),
            json!({"description": "Minutes until the command is stopped and the timeout \
                                   reported (1-60).", "type": "integer", "minimum": 1,
                   "maximum": MAX_TIMEOUT_MIN, "default": MAX_TIMEOUT_MIN}),
        );
        props.insert(
            "keywords".into(),
            json!({"description": "Output words that trigger a report (case-insensitive); \
                                   replaces the defaults.", "type": "array",
                   "items": {"type": "string"}, "minItems": 1, "maxItems": 32,
                   "default": defaults}),
        );
        props.insert(
            "group".into(),
            json!({"description": "Legs with the same group name form one group: one \
                                   completion event once all are done.", "type": "string",
                   "pattern": "^[A-Za-z0-9._-]{1,64}$"}),
        );
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(v: Value) -> String {
        BackgroundArgs::from_json(&v)
            .unwrap_err()
            .message()
            .to_owned()
    }

    #[test]
    fn the_defaults_are_sixty_minutes_and_the_seed_keywords() {
        let a = BackgroundArgs::from_json(&json!({"argv": ["npm", "run", "dev"]})).unwrap();
        assert_eq!(a.timeout_min, 60);
        assert_eq!(
            a.keywords().len(),
            super::super::monitor::DEFAULT_KEYWORDS.len()
        );
        assert_eq!(a.command.argv, ["npm", "run", "dev"]);
        assert!(a.objective.is_none() && a.next.is_none() && a.group.is_none());
    }

    #[test]
    fn own_fields_are_taken_and_the_rest_goes_to_run_command() {
        let a = BackgroundArgs::from_json(&json!({
            "argv": ["cargo", "test"], "network": true, "timeout_min": 5,
            "objective": "tests pass", "next": "open a PR", "keywords": ["FAILED"],
            "group": "ci-1"
        }))
        .unwrap();
        assert!(a.command.network);
        assert_eq!((a.timeout_min, a.group.as_deref()), (5, Some("ci-1")));
        assert_eq!(a.keywords(), ["failed"]);
        assert_eq!(a.next.as_deref(), Some("open a PR"));
    }

    #[test]
    fn out_of_range_timeouts_are_refused_with_the_range() {
        for bad in [json!(0), json!(61), json!(-1), json!(1.5), json!("5")] {
            let m = err(json!({"argv": ["true"], "timeout_min": bad}));
            assert!(m.contains("from 1 to 60"), "{m}");
        }
    }

    #[test]
    fn bad_fields_say_what_to_send() {
        assert!(err(json!({"argv": ["true"], "keywords": "error"})).contains("list of strings"));
        assert!(err(json!({"argv": ["true"], "keywords": [1]})).contains("must be a string"));
        assert!(err(json!({"argv": ["true"], "group": "a b"})).contains("letters"));
        assert!(err(json!({"argv": ["true"], "objective": 3})).contains("string"));
        let long = "x".repeat(MAX_NOTE_BYTES + 1);
        assert!(err(json!({"argv": ["true"], "next": long})).contains("longer"));
        let m = err(json!({"argv": ["true"], "bogus": 1}));
        assert!(m.contains("background_command"), "{m}");
        assert!(err(json!(["true"])).contains("JSON object"));
    }

    #[test]
    fn the_schema_has_every_field_and_no_others() {
        let s = background_input_schema();
        let props = s["properties"].as_object().unwrap();
        for name in ["argv", "network", "write_paths", "sandbox"]
            .iter()
            .chain(&OWN)
        {
            assert!(props.contains_key(*name), "{name}");
        }
        assert_eq!(props.len(), 9);
        assert_eq!(s["additionalProperties"], json!(false));
    }
}
