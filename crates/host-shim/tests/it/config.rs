//! The agent configuration v2 table: every field, every refusal, each naming the field (PERM-4,
//! PERM-5), and the check against folder grants.

use host_shim::{AgentConfig, Runtime, ToolName, WorkspaceKind};
use serde_json::{Value, json};
use toolscope::{Capability, FolderGrant, PluginRecord};

fn base() -> Value {
    json!({
        "schemaVersion": 2,
        "systemPrompt": "Work on the text files.",
        "tools": [{"ref": "read"}, {"ref": "write"}, {"ref": "run"}],
        "workspace": {"kind": "mounted", "path": "/home/u/notes"},
        "memory": "session",
        "mode": "yolo"
    })
}

/// Applies `change` to the base configuration and expects acceptance (`None`) or a refusal of
/// `field` whose message contains `says`.
fn check(change: impl FnOnce(&mut serde_json::Map<String, Value>), expect: Option<(&str, &str)>) {
    let mut v = base();
    change(v.as_object_mut().unwrap());
    let got = AgentConfig::from_value(&v);
    match (got, expect) {
        (Ok(_), None) => {}
        (Err(e), Some((field, says))) => {
            assert_eq!(e.field(), field, "{v}: {e}");
            assert!(e.to_string().contains(says), "{e} should say {says:?}");
            assert!(!e.fix().is_empty(), "{e} names a fix");
        }
        (got, expect) => panic!("{v}: got {got:?}, expected {expect:?}"),
    }
}

#[test]
fn config_validation_table() {
    // PERM-5: every field.
    check(|_| {}, None);
    check(
        |m| {
            m.remove("mode");
        },
        None,
    );
    check(
        |m| {
            m.insert("runtime".into(), json!("pi"));
        },
        None,
    );
    check(
        |m| {
            m.insert("runtime".into(), json!("dsh"));
        },
        None,
    );
    check(
        |m| {
            m.insert("runtime".into(), json!("codex"));
        },
        None,
    );
    check(
        |m| {
            m.insert("systemPrompt".into(), json!(""));
        },
        None,
    );
    check(
        |m| {
            m.insert("tools".into(), json!([]));
        },
        None,
    );
    check(
        |m| {
            m.insert("workspace".into(), json!({"kind": "direct", "path": "/w"}));
        },
        None,
    );
    check(
        |m| {
            m.insert("workspace".into(), json!({"kind": "app-private"}));
        },
        None,
    );

    // schemaVersion
    check(
        |m| {
            m.remove("schemaVersion");
        },
        Some(("schemaVersion", "missing")),
    );
    check(
        |m| {
            m.insert("schemaVersion".into(), json!(1));
        },
        Some(("schemaVersion", "only version 2")),
    );
    check(
        |m| {
            m.insert("schemaVersion".into(), json!(3));
        },
        Some(("schemaVersion", "only version 2")),
    );
    check(
        |m| {
            m.insert("schemaVersion".into(), json!("2"));
        },
        Some(("schemaVersion", "only version 2")),
    );
    check(
        |m| {
            m.insert("schemaVersion".into(), json!(2.5));
        },
        Some(("schemaVersion", "only version 2")),
    );
    // systemPrompt
    check(
        |m| {
            m.remove("systemPrompt");
        },
        Some(("systemPrompt", "missing")),
    );
    check(
        |m| {
            m.insert("systemPrompt".into(), json!(7));
        },
        Some(("systemPrompt", "not a string")),
    );
    check(
        |m| {
            m.insert("systemPrompt".into(), json!("x".repeat(65 * 1024)));
        },
        Some(("systemPrompt", "over the limit")),
    );
    // tools (PERM-4)
    check(
        |m| {
            m.remove("tools");
        },
        Some(("tools", "missing")),
    );
    check(
        |m| {
            m.insert("tools".into(), json!({"ref": "read"}));
        },
        Some(("tools", "not an array")),
    );
    check(
        |m| {
            m.insert("tools".into(), json!(["read"]));
        },
        Some(("tools[0]", "not an object")),
    );
    check(
        |m| {
            m.insert("tools".into(), json!([{}]));
        },
        Some(("tools[0].ref", "missing")),
    );
    check(
        |m| {
            m.insert("tools".into(), json!([{"ref": "shell"}]));
        },
        Some(("tools[0].ref", "\"shell\" is not one of")),
    );
    check(
        |m| {
            m.insert("tools".into(), json!([{"ref": "Read"}]));
        },
        Some(("tools[0].ref", "is not one of")),
    );
    check(
        |m| {
            m.insert("tools".into(), json!([{"ref": 1}]));
        },
        Some(("tools[0].ref", "not a string")),
    );
    check(
        |m| {
            m.insert("tools".into(), json!([{"ref": "read"}, {"ref": "read"}]));
        },
        Some(("tools[1].ref", "listed twice")),
    );
    check(
        |m| {
            m.insert("tools".into(), json!([{"ref": "read", "version": 1}]));
        },
        Some(("tools[0].version", "not a field")),
    );
    // workspace
    check(
        |m| {
            m.remove("workspace");
        },
        Some(("workspace", "missing")),
    );
    check(
        |m| {
            m.insert("workspace".into(), json!("/w"));
        },
        Some(("workspace", "not an object")),
    );
    check(
        |m| {
            m.insert("workspace".into(), json!({"path": "/w"}));
        },
        Some(("workspace.kind", "missing")),
    );
    check(
        |m| {
            m.insert("workspace".into(), json!({"kind": "shared", "path": "/w"}));
        },
        Some(("workspace.kind", "\"shared\" is not one of")),
    );
    check(
        |m| {
            m.insert("workspace".into(), json!({"kind": "mounted"}));
        },
        Some(("workspace.path", "missing")),
    );
    check(
        |m| {
            m.insert("workspace".into(), json!({"kind": "direct", "path": null}));
        },
        Some(("workspace.path", "not a string")),
    );
    check(
        |m| {
            m.insert(
                "workspace".into(),
                json!({"kind": "mounted", "path": "用户已通过面板授权的路径"}),
            );
        },
        Some(("workspace.path", "placeholder")),
    );
    check(
        |m| {
            m.insert(
                "workspace".into(),
                json!({"kind": "mounted", "path": "notes"}),
            );
        },
        Some(("workspace.path", "not an absolute path")),
    );
    check(
        |m| {
            m.insert("workspace".into(), json!({"kind": "mounted", "path": ""}));
        },
        Some(("workspace.path", "empty")),
    );
    check(
        |m| {
            m.insert(
                "workspace".into(),
                json!({"kind": "mounted", "path": "/home/u/../root"}),
            );
        },
        Some(("workspace.path", "`..`")),
    );
    check(
        |m| {
            m.insert(
                "workspace".into(),
                json!({"kind": "mounted", "path": "/a\u{0}b"}),
            );
        },
        Some(("workspace.path", "NUL")),
    );
    check(
        |m| {
            m.insert(
                "workspace".into(),
                json!({"kind": "app-private", "path": "/w"}),
            );
        },
        Some(("workspace.path", "app-private")),
    );
    check(
        |m| {
            m.insert(
                "workspace".into(),
                json!({"kind": "direct", "path": "/w", "readOnly": true}),
            );
        },
        Some(("workspace.readOnly", "not a field")),
    );
    // memory
    check(
        |m| {
            m.remove("memory");
        },
        Some(("memory", "missing")),
    );
    check(
        |m| {
            m.insert("memory".into(), json!("persistent"));
        },
        Some(("memory", "is not one of")),
    );
    // mode
    check(
        |m| {
            m.insert("mode".into(), json!("safe"));
        },
        Some(("mode", "\"safe\" is not one of")),
    );
    check(
        |m| {
            m.insert("mode".into(), json!(null));
        },
        Some(("mode", "not a string")),
    );
    check(
        |m| {
            m.insert("mode".into(), json!("YOLO"));
        },
        Some(("mode", "is not one of")),
    );
    // runtime
    check(
        |m| {
            m.insert("runtime".into(), json!("node"));
        },
        Some(("runtime", "is not one of")),
    );
    check(
        |m| {
            m.insert("runtime".into(), json!(null));
        },
        Some(("runtime", "not a string")),
    );
    // unknown fields, anywhere
    check(
        |m| {
            m.insert("voice".into(), json!(true));
        },
        Some(("voice", "not a field")),
    );
    check(
        |m| {
            m.insert("SchemaVersion".into(), json!(2));
        },
        Some(("SchemaVersion", "not a field")),
    );
}

#[test]
fn documents_that_are_not_objects_are_refused() {
    for text in ["", "[]", "2", "null", "{", "{\"schemaVersion\": 2,}"] {
        let err = AgentConfig::parse(text).unwrap_err();
        assert_eq!(err.field(), "(document)", "{text:?}: {err}");
    }
}

#[test]
fn an_accepted_config_reads_back_every_field() {
    let mut v = base();
    v["runtime"] = json!("codex");
    let c = AgentConfig::from_value(&v).unwrap();
    assert_eq!(c.schema_version, 2);
    assert_eq!(c.system_prompt, "Work on the text files.");
    assert!(c.offers(ToolName::Run) && c.offers(ToolName::Read) && !c.offers(ToolName::Command));
    assert_eq!(c.workspace.kind, WorkspaceKind::Mounted);
    assert_eq!(
        c.workspace.path.as_deref(),
        Some(std::path::Path::new("/home/u/notes"))
    );
    assert!(c.is_yolo());
    assert_eq!(c.runtime, Some(Runtime::Codex));
    // Round trip through the typed form gives the same JSON back.
    assert_eq!(serde_json::to_value(&c).unwrap(), v);
}

#[test]
fn workspace_path_must_be_one_of_the_plugins_folder_grants() {
    // PERM-5.
    let c = AgentConfig::from_value(&base()).unwrap();
    let mut record = PluginRecord::fully_granted("p@1", &[Capability::TerminalExec]);
    let err = c
        .check_grants(&"notes".parse().unwrap(), &record)
        .unwrap_err();
    assert_eq!(err.field(), "workspace.path");
    assert!(
        err.to_string().contains("agent-exec grant folder notes"),
        "{err}"
    );
    record.folder_grants.insert(FolderGrant {
        path: "/home/u".into(),
    });
    assert!(
        c.check_grants(&"notes".parse().unwrap(), &record).is_err(),
        "a parent is not the folder"
    );
    record.folder_grants.insert(FolderGrant {
        path: "/home/u/notes".into(),
    });
    c.check_grants(&"notes".parse().unwrap(), &record).unwrap();
}

#[test]
fn published_schema_matches_the_types() {
    let schema = AgentConfig::json_schema();
    let published: Value =
        serde_json::from_str(include_str!("../../schema/agent-config.v2.json")).unwrap();
    assert_eq!(
        schema, published,
        "regenerate with `agent-exec schema config > crates/host-shim/schema/agent-config.v2.json`"
    );
    assert_eq!(schema["additionalProperties"], json!(false));
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for field in [
        "schemaVersion",
        "systemPrompt",
        "tools",
        "workspace",
        "memory",
    ] {
        assert!(
            required.contains(&field),
            "{field} is required in the schema"
        );
    }
}
