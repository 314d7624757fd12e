//! `rm` → the trash (RC-4), after re-checking every path on the file system.
//!
//! **Owns:** resolving each path's parent directory component by component (symbolic links
//! followed, as the kernel would), never following the final name (`rm` removes a link, not
//! its target), classifying the REAL location (inside the working directory, elsewhere in
//! `$HOME`, outside) into the RC-4 gate it needs, `rm`'s own answers for missing paths
//! (an error unless `-f`) and directories (an error without `-r`/`-R`/`-d`), and the move
//! itself: on Linux through descriptors (module `trashdir`: the entry must still be the file
//! checked, reached with no link on its way, and goes only into a trash directory of the
//! user's reached without a link, never by copy), elsewhere with the `trash` crate (the
//! Finder's trash).
//! **Refuses to know:** how the gate is asked (module `gate`).
//!
//! **Limit (macOS).** The trash crate moves by path: between the check and the move, a process
//! of the same user could swap a parent directory again.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use argv_policy::{Gate, Mode};
use toolscope::ToolError;

use crate::roots::canonical;
use crate::types::Trashed;

/// One path of `rm`'s argv, re-checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// It exists at `real` (the canonical parent joined with the final name), as the file
    /// with this device and inode.
    Found {
        real: PathBuf,
        is_dir: bool,
        id: (u64, u64),
    },
    /// Nothing there.
    Missing(PathBuf),
}

/// Where a real path lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Place {
    Workdir,
    Home,
    Outside,
}

/// The flags of `rm`'s argv that change what it does: `-f`/`--force`, `-r`/`-R`/`--recursive`,
/// `-d`/`--dir`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flags {
    pub(crate) force: bool,
    pub(crate) recursive: bool,
}

pub(crate) fn flags(argv: &[String]) -> Flags {
    let mut f = Flags::default();
    for a in argv.iter().skip(1) {
        if a == "--" {
            break;
        }
        match a.as_str() {
            "--force" => f.force = true,
            "--recursive" | "--dir" => f.recursive = true,
            s if s.starts_with('-') && !s.starts_with("--") => {
                f.force |= s.contains('f');
                f.recursive |= s.contains('r') || s.contains('R') || s.contains('d');
            }
            _ => {}
        }
    }
    f
}

/// Re-checks one path the decision normalised lexically.
pub(crate) fn check(path: &Path) -> Target {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Target::Missing(path.to_path_buf());
    };
    // realpath(3) resolves the parent component by component, following links; the final
    // name is looked at without following it.
    let Ok(parent) = std::fs::canonicalize(parent) else {
        return Target::Missing(path.to_path_buf());
    };
    let real = parent.join(name);
    match std::fs::symlink_metadata(&real) {
        Ok(m) => Target::Found {
            real,
            is_dir: m.is_dir(),
            id: (m.dev(), m.ino()),
        },
        Err(_) => Target::Missing(path.to_path_buf()),
    }
}

pub(crate) fn place(real: &Path, workdir: &Path, home: &Path) -> Place {
    let workdir = canonical(workdir);
    let home = canonical(home);
    if real.starts_with(&workdir) && real != workdir {
        Place::Workdir
    } else if real.starts_with(&home) {
        Place::Home
    } else {
        Place::Outside
    }
}

/// The RC-4 gate of a real location under `mode`.
pub(crate) fn gate_for(place: Place, mode: Mode, real: &Path) -> Gate {
    match place {
        Place::Workdir if mode == Mode::Safe => {
            Gate::Confirm(format!("rm (move to trash): {}", real.display()))
        }
        Place::Workdir => Gate::None,
        Place::Home if mode == Mode::AllowAll => Gate::None,
        Place::Home => Gate::Confirm(format!(
            "rm (move to trash, outside the working directory): {}",
            real.display()
        )),
        Place::Outside => Gate::Password(format!(
            "rm (move to trash, outside $HOME): {}",
            real.display()
        )),
    }
}

/// What `rm` would do, checked before the gate: the targets and the gate they need.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) targets: Vec<Target>,
    pub(crate) gate: Gate,
    pub(crate) flags: Flags,
    /// The working directory, canonical.
    pub(crate) workdir: PathBuf,
}

/// # Errors
/// `RUN_COMMAND_RM_INVALID` when a real path is or holds repository metadata or a protected
/// path (module `gitguard`): nothing is moved.
pub(crate) fn plan(
    argv: &[String],
    paths: &[PathBuf],
    workdir: &Path,
    home: &Path,
    mode: Mode,
    protected: &[PathBuf],
) -> Result<Plan, ToolError> {
    let flags = flags(argv);
    let mut gate = Gate::None;
    let mut targets = Vec::new();
    let real_home = canonical(home);
    let path_dirs = crate::roots::path_dirs(&std::env::var_os("PATH").unwrap_or_default(), home);
    for p in paths {
        let t = check(p);
        if let Target::Found { real, is_dir, .. } = &t {
            crate::gitguard::refuse_rm(real, *is_dir, home, protected)?;
            let real_place = place(real, workdir, home);
            gate = gate.max(gate_for(real_place, mode, real));
            // TRUST-5: what a write path there would need the password for (a dot-directory,
            // ~/bin, a PATH directory), removing needs too: a cache's or a program's file gone
            // changes what host programs run as surely as a new one.
            if real_place == Place::Home {
                if let Some(why) = crate::roots::lexical_write_class(real, &real_home, &path_dirs) {
                    gate = gate.max(Gate::Password(format!(
                        "rm (move to trash) of {}, {}",
                        real.display(),
                        why.describe()
                    )));
                }
            }
        }
        targets.push(t);
    }
    Ok(Plan {
        targets,
        gate,
        flags,
        workdir: canonical(workdir),
    })
}

/// Moves the found targets to the trash (after the gate); returns what went where, `rm`-style
/// messages for what could not, and the exit code (`rm`'s: 1 when anything failed).
pub(crate) fn carry_out(plan: &Plan) -> (Vec<Trashed>, String, i32) {
    let mut trashed = Vec::new();
    let mut out = String::new();
    let mut code = 0;
    for t in &plan.targets {
        match t {
            Target::Missing(p) => {
                if !plan.flags.force {
                    out.push_str(&format!(
                        "rm: cannot remove '{}': No such file or directory\n",
                        p.display()
                    ));
                    code = 1;
                }
            }
            Target::Found { real, is_dir, .. } if *is_dir && !plan.flags.recursive => {
                out.push_str(&format!(
                    "rm: cannot remove '{}': Is a directory (pass -r to move it to the trash)\n",
                    real.display()
                ));
                code = 1;
            }
            Target::Found { real, id, .. } => match to_trash(real, *id, &plan.workdir) {
                Ok(restore_from) => trashed.push(Trashed {
                    path: real.to_string_lossy().into_owned(),
                    restore_from,
                }),
                Err(e) => {
                    out.push_str(&format!("rm: '{}': {e}\n", real.display()));
                    code = 1;
                }
            },
        }
    }
    (trashed, out, code)
}

/// Moves `real` (checked as `id`) to the trash; where it went, when that is known.
#[cfg(target_os = "linux")]
fn to_trash(real: &Path, id: (u64, u64), workdir: &Path) -> Result<Option<String>, String> {
    let in_workdir = real.starts_with(workdir) && real != workdir;
    crate::trashdir::move_to_trash(real, id, workdir, in_workdir)
        .map(|at| Some(at.to_string_lossy().into_owned()))
}

/// Moves `real` to the Finder's trash (`~/.Trash`, under the same name unless it was taken).
#[cfg(not(target_os = "linux"))]
fn to_trash(real: &Path, _id: (u64, u64), _workdir: &Path) -> Result<Option<String>, String> {
    #[cfg(target_os = "freebsd")]
    crate::trashdir::check(real)?;
    trash::delete(real).map_err(|e| format!("cannot move it to the trash: {e}"))?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn flags_after_a_double_dash_are_paths(
            before in proptest::collection::vec("-[a-zA-Z]{1,3}", 0..4),
            after in proptest::collection::vec("-[a-zA-Z]{1,3}", 0..4),
        ) {
            let mut argv = vec!["rm".to_string()];
            argv.extend(before.iter().cloned());
            let head = flags(&argv);
            argv.push("--".into());
            argv.extend(after.iter().cloned());
            prop_assert_eq!(flags(&argv), head);
        }
    }

    #[test]
    fn flags_read_combined_short_options() {
        let f = |v: &[&str]| flags(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            f(&["rm", "-rf", "x"]),
            Flags {
                force: true,
                recursive: true
            }
        );
        assert_eq!(f(&["rm", "x", "--", "-f"]), Flags::default());
        assert!(f(&["rm", "--force", "x"]).force);
    }

    #[test]
    fn removing_from_a_dot_directory_of_home_needs_the_password_in_every_mode() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap().join("home");
        let work = home.join("proj");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(home.join(".local/bin")).unwrap();
        std::fs::write(home.join(".local/bin/git"), "x").unwrap();
        std::fs::write(home.join("notes.txt"), "x").unwrap();
        let argv = ["rm".to_owned(), "x".to_owned()];
        for mode in [Mode::AllowAll, Mode::Auto, Mode::Safe] {
            let plan = plan(
                &argv,
                &[home.join(".local/bin/git")],
                &work,
                &home,
                mode,
                &[],
            )
            .unwrap();
            assert!(
                matches!(plan.gate, Gate::Password(_)),
                "{mode:?}: {:?}",
                plan.gate
            );
        }
        // An ordinary file of $HOME keeps its gate.
        let plan = plan(
            &argv,
            &[home.join("notes.txt")],
            &work,
            &home,
            Mode::Auto,
            &[],
        )
        .unwrap();
        assert!(matches!(plan.gate, Gate::Confirm(_)), "{:?}", plan.gate);
    }

    #[test]
    fn a_symlinked_parent_is_classified_by_where_it_really_points() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let home = base.join("home");
        let work = home.join("proj");
        let outside = base.join("outside");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("f"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, work.join("sub")).unwrap();
        let Target::Found { real, .. } = check(&work.join("sub/f")) else {
            panic!("missing");
        };
        assert_eq!(real, outside.join("f"));
        assert_eq!(place(&real, &work, &home), Place::Outside);
        // The link itself (final name) stays a link inside the working directory.
        let Target::Found { real, .. } = check(&work.join("sub")) else {
            panic!("missing");
        };
        assert_eq!(real, work.join("sub"));
        assert_eq!(place(&real, &work, &home), Place::Workdir);
        assert!(matches!(
            gate_for(Place::Outside, Mode::AllowAll, &real),
            Gate::Password(_)
        ));
        assert_eq!(gate_for(Place::Workdir, Mode::Auto, &real), Gate::None);
    }
}
