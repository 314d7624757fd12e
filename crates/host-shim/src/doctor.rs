//! `agent-exec doctor`: which sandbox features this machine has, which process-cleanup mode
//! will be used, the system runtime set a `command` gets, and the read and write sets of
//! `run_command`'s sandbox in this home, as JSON. Facts only, from `linux_sandbox::probe()`,
//! `proctree::pid_namespace_available()`, `exec::sysset::current()`, the `Policy`'s private
//! and cache locations resolved against this process's environment (TRUST-6) and the walk for
//! other projects' `.env` files (the sets the next call would be given, by the same rules);
//! nothing is guessed.

use std::path::{Path, PathBuf};

use run_command_tool::{Mode, Policy};
use serde_json::{Value, json};

/// The names inside every writable root of `run_command` that stay read-only (RCS-3), as
/// run-command-tool's `roots::protected` finds them (at the root and two levels below it).
const PROTECTED_IN_ROOTS: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".git (when it is a file pointing elsewhere)",
    ".gitmodules",
];

/// Where `run_command` would run: the user's home, the host's environment (its relocation
/// variables move private locations, TRUST-6) and the working directory (its own project's
/// `.env` files stay readable).
#[derive(Debug, Clone, Copy)]
pub struct HostView<'a> {
    /// The user's `$HOME`.
    pub home: &'a Path,
    /// The host's environment, a later entry of a name winning.
    pub env: &'a [(String, String)],
    /// The working directory.
    pub workdir: &'a Path,
}

/// `run_command`'s sandbox in `host` under `policy` (RCS-1…RCS-3, TRUST-6): `$HOME` readable
/// except the private locations (the shipped and user list, where the host's environment
/// relocates them too, and other projects' `.env` files), the toolchains' caches that exist
/// here writable, and what stays read-only inside every writable root — the repository files,
/// the shell startup files (when a writable root holds them) and the host's own configuration
/// files (`host_files`, those that exist).
///
/// ```
/// use host_shim::doctor::{HostView, run_command_sets};
/// let policy = host_shim::Policy::defaults(host_shim::RunCommandMode::Safe);
/// let env = [("DOCKER_CONFIG".to_owned(), "/home/u/cfg/docker".to_owned())];
/// let host = HostView { home: "/home/u".as_ref(), env: &env, workdir: "/home/u/p".as_ref() };
/// let sets = run_command_sets(&policy, host, &[]);
/// assert_eq!(sets["read"]["home"], "/home/u");
/// assert_eq!(sets["read"]["relocated"][0]["path"], "/home/u/cfg/docker");
/// assert!(sets["protected"]["inEveryWritableRoot"].as_array().unwrap().len() >= 3);
/// ```
pub fn run_command_sets(policy: &Policy, host: HostView<'_>, host_files: &[PathBuf]) -> Value {
    let home = host.home;
    let exists = |p: &PathBuf| std::fs::symlink_metadata(p).is_ok();
    let private = policy.private_paths_in(home, host.env);
    let relocated: Vec<Value> = policy
        .relocated_paths(home, host.env)
        .iter()
        .map(|p| json!({"path": p.to_string_lossy(), "exists": exists(p)}))
        .collect();
    let hidden: Vec<&PathBuf> = private.iter().filter(|p| exists(p)).collect();
    let caches: Vec<PathBuf> = policy
        .cache_paths(home)
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect();
    // The walk and the skips of a call (run-command-tool's `prepare`); a call's write_paths
    // are left out of its walk too.
    let skip: Vec<PathBuf> = private.iter().chain(&caches).cloned().collect();
    let env_files = run_command_tool::other_projects_env_files(home, host.workdir, &skip);
    let host_files: Vec<&PathBuf> = host_files.iter().filter(|p| exists(p)).collect();
    // TRUST-6: what a call with network reads of $HOME, as that call resolves it.
    let network_allowed = policy.network_home_paths(home, host.env);
    let network_home: Vec<PathBuf> = network_allowed
        .iter()
        .filter(|p| exists(p))
        .cloned()
        .collect();
    let network_allowed = network_allowed.len();
    let network_caches: Vec<String> = policy
        .network_cache_paths(home, host.env)
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    // Shown lossily where not UTF-8: JSON holds only Unicode, and the report must not fail.
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let texts = |ps: &[&PathBuf]| ps.iter().map(|p| text(p)).collect::<Vec<_>>();
    let hidden = texts(&hidden);
    let caches: Vec<String> = caches.iter().map(|p| text(p)).collect();
    let host_files = texts(&host_files);
    let env_texts: Vec<String> = env_files.files.iter().map(|p| text(p)).collect();
    let env_rule = format!(
        ".env, .env.* and .envrc files under $HOME outside the working directory's own \
         project, looked for {} levels deep at most, never inside a dot-directory, \
         node_modules, a cache or a private location; {} entries read and {} files kept at most",
        run_command_tool::ENV_WALK_DEPTH,
        run_command_tool::ENV_WALK_ENTRIES,
        run_command_tool::ENV_FILES_MAX
    );
    json!({
        "mode": policy.mode.as_str(),
        "read": {
            "home": text(home),
            "rule": "the system runtime, the working directory, and $HOME except its private locations",
            "hiddenHere": hidden,
            "privateLocations": private.len(),
            "relocated": relocated,
            "otherProjectsEnvFiles": {
                "rule": env_rule,
                "workdir": text(host.workdir),
                "files": env_texts,
                "cutOff": env_files.cut_off,
            },
            "withNetwork": {
                "rule": "network: true reads of $HOME only the toolchains' homes and caches, the PATH directories below $HOME and git's and the package managers' settings (the private locations inside them stay hidden; a token written inline into one of those settings files is readable), and writes the caches below through a private copy",
                "allowedHere": texts(&network_home.iter().collect::<Vec<_>>()),
                "allowedLocations": network_allowed,
                "cachesHere": network_caches,
            },
        },
        "write": {
            "rule": "the working directory, the call's temp dir, the caches below, and write_paths (in $HOME after a confirmation where no host program reads configuration or code, otherwise after the system password)",
            "cachesHere": caches,
        },
        "protected": {
            "inEveryWritableRoot": PROTECTED_IN_ROOTS,
            "shellStartupFiles": argv_policy::SHELL_STARTUP_FILES,
            "hostFiles": host_files,
        },
        "network": "none unless the call says \"network\": true",
    })
}

/// The `runCommand` part of the report for the user's `$HOME` (unset: not shown as sets), this
/// process's environment and working directory.
fn run_command_part(policy: &Policy) -> Value {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let workdir = std::env::current_dir().unwrap_or_default();
    match std::env::var_os("HOME").map(PathBuf::from) {
        Some(home) if home.is_absolute() => {
            let host = HostView {
                home: &home,
                env: &env,
                workdir: &workdir,
            };
            run_command_sets(policy, host, &[])
        }
        _ => {
            json!({"home": null, "note": "HOME is not set to an absolute path; run_command cannot run"})
        }
    }
}

/// The doctor report with `run_command`'s sets under `policy` (the user's run_command
/// configuration may add private locations).
pub fn report_with(policy: &Policy) -> Value {
    let mut report = report();
    if let Value::Object(map) = &mut report {
        map.insert("runCommand".into(), run_command_part(policy));
    }
    report
}

/// The report's `runCommand` under the shipped lists.
fn default_run_command() -> Value {
    run_command_part(&Policy::defaults(Mode::Safe))
}

/// The doctor report.
///
/// ```
/// let report = host_shim::doctor::report();
/// assert!(report["platform"].is_string());
/// assert!(report["sandbox"]["enforced"].is_boolean());
/// ```
#[cfg(target_os = "linux")]
pub fn report() -> Value {
    use linux_sandbox::LandlockSupport;
    let probe = linux_sandbox::probe();
    let landlock = match probe.landlock() {
        LandlockSupport::Available { abi } => json!({
            "available": true,
            "kernelAbi": abi,
            "usedAbi": probe.landlock_abi(),
        }),
        LandlockSupport::NotEnabled => json!({
            "available": false,
            "reason": "built in but not enabled; add landlock to the lsm= boot parameter",
        }),
        _ => json!({
            "available": false,
            "reason": "not available; needs Linux 5.13+ with Landlock",
        }),
    };
    let pid_ns = proctree::pid_namespace_available();
    // What the namespace protections come to here: the same rule `linux_sandbox::Policy::prepare`
    // applies (private namespaces where the kernel allows them and the command's process may
    // make them: as root, or inside the supervisor's own user namespace).
    let namespaces = probe.private_namespaces_for(linux_sandbox::Launch {
        own_user_namespace: proctree::user_namespace_in_use(),
        own_pid_namespace: pid_ns,
    });
    // Where a shell would get out (no private mount namespace; Landlock below ABI 6
    // without a PID namespace) `command` and `run_command` are refused, and why.
    let shells = probe
        .shell_refusal(linux_sandbox::Launch {
            own_user_namespace: proctree::user_namespace_in_use(),
            own_pid_namespace: pid_ns,
        })
        .map_or_else(
            || "run (contained: see the protections)".to_owned(),
            |why| format!("REFUSED here: {why}"),
        );
    let protections = json!({
        "shellCommands": shells,
        "privateNamespaces": namespaces,
        "metadataOutsideWritablePaths": if namespaces {
            "protected: everything but the writable paths is a read-only view (chmod, chown, utimes, xattrs refused)"
        } else {
            "NOT protected: mode, owner and times of the user's own files outside the writable paths can change"
        },
        "hostIpc": if namespaces {
            "out of reach: private IPC namespace, gone with the call"
        } else {
            "refused by seccomp (System V IPC and POSIX message queues)"
        },
        "stateDirectory": if namespaces {
            "hidden inside workspaces and extra paths, its parents pinned"
        } else {
            "a workspace or extra path containing it is refused"
        },
        "setIdBitsXattrsImmutableFlag": "refused by seccomp",
        "capabilities": "all dropped (bounding, ambient, effective, permitted, inheritable)",
        "otherProcesses": if pid_ns {
            "limits, priorities and CPU affinity of PID 1 (the supervisor) refused; the rest of the PID namespace is the command's own"
        } else {
            "limits, priorities and CPU affinity of any process but the caller refused"
        },
        "unknownSystemCalls": "ENOSYS for every number newer than the filter knows",
        // What a shell command's own world comes to here (the same conditions
        // `linux_sandbox::Policy::prepare` applies for a policy that may spawn).
        "commandView": if namespaces {
            "a root holding only the grants and the system runtime: no host socket, /run, /home or /var outside them"
        } else {
            "the host's tree, restricted by Landlock"
        },
        "procAndShm": if namespaces && pid_ns && probe.private_proc() {
            "a private /proc of the command's PID namespace (only its processes; for a root host the machine-wide root-only tables slabinfo, vmallocinfo, pagetypeinfo, timer_list, keys and key-users read empty) and a private, size-bounded /dev/shm"
        } else if namespaces {
            "a private /dev/shm; /proc limited to a few machine-wide files (no PID namespace proc mount here)"
        } else {
            "no /proc of the command's own and no /dev/shm"
        },
        "unixSockets": if namespaces {
            "allowed inside the command's own root, refused when an extra path is approved; an extra path holding a socket (or /tmp, /run, /dev, ~/.gnupg, ~/.ssh) is refused; abstract names are the call's own where it has a private network namespace (the summary says whether this machine gives one); NOT covered where it has none: host clients connecting to an abstract name the command binds"
        } else {
            "refused (socketpair only): the view holds the host's sockets"
        },
        "hardLinks": if namespaces {
            "refused, except two names directly in the private /dev/shm, made by the supervisor (POSIX semaphores)"
        } else {
            "refused"
        },
        "pathsNotProtected": "stat and inotify on outside paths still reveal names and metadata (Landlock governs neither)",
    });
    json!({
        "ok": true,
        "platform": "linux",
        "landlock": landlock,
        "seccomp": probe.seccomp(),
        "userNamespaces": probe.user_namespaces(),
        "sandbox": {
            "enforced": probe.can_sandbox(),
            "summary": probe.to_string(),
            "protections": protections,
        },
        "cleanup": {
            "mode": if pid_ns { "pid-namespace" } else { "subreaper" },
            "pidNamespace": pid_ns,
        },
        "systemSet": system_set(),
        "limits": limits(namespaces),
        "runCommand": default_run_command(),
    })
}

/// The per-call resource limits (LIM-1): the values, how each is held here, and the host's
/// `AGENT_EXEC_LIMITS` setting.
#[cfg(target_os = "linux")]
fn limits(namespaces: bool) -> Value {
    let host = match exec::limits::host_overrides() {
        Ok(Some(_)) => json!({"set": true, "ok": true}),
        Ok(None) => json!({"set": false}),
        Err(e) => json!({"set": true, "ok": false, "error": e.to_string()}),
    };
    let command = exec::ResourceLimits::for_command();
    let run = exec::ResourceLimits::for_run();
    json!({
        "command": exec::limits_report_here(&command, namespaces).to_string(),
        // `run` is a single program: no private /dev/shm or temp tmpfs (RLIMIT_FSIZE).
        "run": exec::limits_report_here(&run, false).to_string(),
        "cgroups": exec::describe_limit_mechanisms(),
        "hostSetting": host,
        "env": exec::limits::LIMITS_ENV,
    })
}

/// The system runtime set of a `command` (CMD-10): the trees by rule, the `/etc`
/// entries allowed, and what is withheld there and why.
#[cfg(target_os = "linux")]
fn system_set() -> Value {
    use std::collections::BTreeMap;
    // Links judged for the report only: a call needs no `realpath` of each.
    let set = exec::sysset::current().judged();
    // A name that is not UTF-8 (any file system may hold one) is shown lossily: JSON holds
    // only Unicode, and the report must not fail for a name.
    let text = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let trees: Vec<Value> = set
        .trees
        .iter()
        .map(|t| {
            json!({
                "path": text(&t.path),
                "access": if t.execute { "read+execute" } else { "read" },
            })
        })
        .collect();
    // Reason → the withheld paths, in the order of the set (sorted by path).
    let mut by_reason: BTreeMap<&str, Vec<&std::path::Path>> = BTreeMap::new();
    for (path, why) in &set.etc.withheld {
        by_reason.entry(why.label()).or_default().push(path);
    }
    let by_reason_text: BTreeMap<&str, Vec<String>> = by_reason
        .iter()
        .map(|(reason, paths)| (*reason, paths.iter().map(|p| text(p)).collect()))
        .collect();
    let name = |p: &std::path::Path| {
        p.strip_prefix("/etc")
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let summary: Vec<String> = by_reason
        .iter()
        .map(|(reason, paths)| {
            let names: Vec<String> = paths.iter().take(6).map(|p| name(p)).collect();
            let more = if paths.len() > 6 { ", …" } else { "" };
            format!("{} {reason} ({}{more})", paths.len(), names.join(", "))
        })
        .collect();
    let denied: Vec<Value> = exec::sysset::ETC_DENIED
        .iter()
        .map(|(n, why)| json!({ "entry": format!("/etc/{n}"), "why": why }))
        .collect();
    json!({
        "trees": trees,
        "etc": {
            "rule": "each /etc entry everyone may read (files o+r, directories o+rx), one rule per fully world-readable subtree; never what only an owner or group may read, never the named deny list; symbolic links reach only targets in the set",
            "rules": set.etc.allowed.len(),
            "allowed": set.etc.allowed.iter().map(|p| text(p)).collect::<Vec<_>>(),
            "linksIntoTheSet": set.etc.links_in_set,
            "withheld": set.etc.withheld.len(),
            "withheldSummary": format!(
                "{} /etc entries withheld: {}",
                set.etc.withheld.len(),
                summary.join("; ")
            ),
            "withheldByReason": by_reason_text,
            "denyList": denied,
        },
        "devices": {
            "readWrite": exec::linux::SHELL_DEVICES,
            "read": exec::linux::SHELL_RANDOM,
            "notGranted": "/dev/tty (a command has no controlling terminal), the host's /dev/ptmx and /dev/pts (every pseudo-terminal of the host); in a root of the grants the command gets a private devpts of its own instead",
        },
        "kernelFacts": exec::linux::SHELL_KERNEL_FACTS,
    })
}

/// The doctor report.
#[cfg(not(target_os = "linux"))]
pub fn report() -> Value {
    json!({
        "ok": true,
        "platform": std::env::consts::OS,
        "sandbox": {
            "enforced": false,
            "summary": "this agent-exec build enforces on Linux only; exec tools return AGENT_EXEC_UNSUPPORTED here",
        },
        "runCommand": default_run_command(),
    })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_home_whose_name_is_not_utf8_is_shown_lossily_not_a_panic() {
        use std::os::unix::ffi::OsStrExt;
        let home = Path::new(std::ffi::OsStr::from_bytes(b"/home/u\xff"));
        let host = HostView {
            home,
            env: &[],
            workdir: home,
        };
        let sets = run_command_sets(&Policy::defaults(argv_policy::Mode::Safe), host, &[]);
        assert_eq!(sets["read"]["home"], "/home/u\u{fffd}");
    }

    #[test]
    fn doctor_prints_the_system_set_and_what_etc_withholds() {
        let report = report();
        let set = &report["systemSet"];
        let trees: Vec<&str> = set["trees"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["path"].as_str().unwrap())
            .collect();
        assert!(trees.contains(&"/usr/bin"), "{trees:?}");
        for never in [
            "/usr",
            "/usr/local/etc",
            "/usr/local/var",
            "/var/lib",
            "/etc",
        ] {
            assert!(!trees.contains(&never), "{never} is a tree: {trees:?}");
        }
        let etc = &set["etc"];
        let allowed: Vec<&str> = etc["allowed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert_eq!(etc["rules"], json!(allowed.len()));
        assert!(!allowed.contains(&"/etc/shadow"), "{allowed:?}");
        let summary = etc["withheldSummary"].as_str().unwrap();
        assert!(summary.contains("/etc entries withheld"), "{summary}");
        if std::path::Path::new("/etc/shadow").exists() {
            assert!(summary.contains("not world-readable"), "{summary}");
            assert!(summary.contains("shadow"), "{summary}");
        }
        assert_eq!(set["devices"]["readWrite"][0], json!("/dev/null"));
    }

    #[test]
    fn doctor_shows_run_commands_sets_in_this_home() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".netrc"), "machine x").unwrap();
        std::fs::create_dir_all(home.join(".cache")).unwrap();
        std::fs::create_dir_all(home.join(".cargo/registry")).unwrap();
        let host_file = home.join("agent.json");
        std::fs::write(&host_file, "{}").unwrap();
        let policy = Policy::defaults(Mode::Auto);
        let host = HostView {
            home,
            env: &[],
            workdir: &home.join("proj"),
        };
        let sets = run_command_sets(&policy, host, &[host_file.clone(), home.join("gone.json")]);
        assert_eq!(sets["mode"], "auto");
        let hidden = sets["read"]["hiddenHere"].as_array().unwrap();
        assert!(hidden.contains(&json!(home.join(".ssh"))), "{sets}");
        assert!(hidden.contains(&json!(home.join(".netrc"))), "{sets}");
        // Only what exists here is listed.
        assert!(
            hidden
                .iter()
                .all(|p| std::path::Path::new(p.as_str().unwrap()).exists()),
            "{sets}"
        );
        let caches = sets["write"]["cachesHere"].as_array().unwrap();
        assert!(caches.contains(&json!(home.join(".cache"))), "{sets}");
        assert!(
            caches.contains(&json!(home.join(".cargo/registry"))),
            "{sets}"
        );
        assert!(!caches.contains(&json!(home.join(".cargo"))), "{sets}");
        assert_eq!(sets["protected"]["hostFiles"], json!([host_file]));
        let startup = sets["protected"]["shellStartupFiles"].as_array().unwrap();
        assert!(startup.contains(&json!(".bashrc")), "{sets}");
        assert!(report()["runCommand"].is_object());
    }

    /// TRUST-6: doctor lists the private set as a call resolves it: relocated locations and
    /// other projects' `.env` files.
    #[test]
    fn doctor_lists_relocated_private_locations_and_other_projects_env_files() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap();
        for d in ["proj/.git", "other/.git", "cfg/docker"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join("other/.env"), "K=v").unwrap();
        std::fs::write(home.join("proj/.env"), "K=v").unwrap();
        let env = [
            (
                "DOCKER_CONFIG".to_owned(),
                home.join("cfg/docker").display().to_string(),
            ),
            (
                "KUBECONFIG".to_owned(),
                home.join("cfg/kube.yaml").display().to_string(),
            ),
        ];
        let host = HostView {
            home: &home,
            env: &env,
            workdir: &home.join("proj"),
        };
        let sets = run_command_sets(&Policy::defaults(Mode::Safe), host, &[]);
        let read = &sets["read"];
        assert_eq!(
            read["relocated"],
            json!([
                {"path": home.join("cfg/docker"), "exists": true},
                {"path": home.join("cfg/kube.yaml"), "exists": false},
            ])
        );
        let hidden = read["hiddenHere"].as_array().unwrap();
        assert!(hidden.contains(&json!(home.join("cfg/docker"))), "{sets}");
        assert_eq!(
            read["otherProjectsEnvFiles"]["files"],
            json!([home.join("other/.env")])
        );
        assert_eq!(read["otherProjectsEnvFiles"]["cutOff"], json!(false));
    }

    /// TRUST-6: doctor lists what a call with network reads of `$HOME` and the caches it
    /// writes through a view, as that call resolves them here.
    #[test]
    fn doctor_lists_the_network_view_of_home() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap();
        for d in [
            "proj",
            ".rustup",
            ".cache/pip",
            ".cache/google-chrome",
            "Documents",
            "bin",
        ] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join(".gitconfig"), "[user]\n").unwrap();
        let env = [(
            "PATH".to_owned(),
            format!("{}:/usr/bin", home.join("bin").display()),
        )];
        let host = HostView {
            home: &home,
            env: &env,
            workdir: &home.join("proj"),
        };
        let sets = run_command_sets(&Policy::defaults(Mode::Safe), host, &[]);
        let net = &sets["read"]["withNetwork"];
        let allowed = net["allowedHere"].as_array().unwrap();
        for yes in [".rustup", ".cache/pip", ".gitconfig", "bin"] {
            assert!(allowed.contains(&json!(home.join(yes))), "{yes}: {sets}");
        }
        for no in ["Documents", ".cache/google-chrome", ".cache", "proj"] {
            assert!(!allowed.contains(&json!(home.join(no))), "{no}: {sets}");
        }
        assert!(net["allowedLocations"].as_u64().unwrap() > allowed.len() as u64);
        assert_eq!(net["cachesHere"], json!([home.join(".cache/pip")]));
    }
}
