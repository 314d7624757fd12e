//! `Mirror`: copy, changes, and the finalize conflict matrix (RUN-11, invariant 7).

use std::fs;
use std::os::unix::fs::symlink;

use fsguard::{
    ChangeKind, ConflictReason, EntryKind, FinalizeReport, Mirror, MirrorError, MirrorOptions,
};

use crate::util::Fixture;

/// How a matrix case takes its baseline; every case runs both ways (see [`matrix!`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A fresh fixture, every file within the racy window: the baseline hashes contents.
    Recent,
    /// The fixture's file-system clock waited past every file's ctime, window zero: metadata
    /// alone decides — the common case of a real folder.
    Settled,
    /// As `Settled`, then the mirror refreshed (`Mirror::refresh`) as a later turn would: the
    /// matrix must hold for a refreshed mirror exactly as for a created one.
    Refreshed,
}

/// Mirrors `src/` of `fx` into `mirror/` the way `mode` says, and checks that the baseline
/// really took that path (hashes for recent files, none for settled ones).
fn create(fx: &Fixture, mode: Mode) -> Mirror {
    let options = match mode {
        Mode::Recent => MirrorOptions::new(),
        Mode::Settled | Mode::Refreshed => {
            fx.settle_clock();
            MirrorOptions::new().racy_window(std::time::Duration::ZERO)
        }
    };
    let mut m = Mirror::create_with(fx.join("src"), fx.join("mirror"), &options).unwrap();
    if mode == Mode::Refreshed {
        m.save_record().unwrap();
        drop(m);
        fx.settle_clock();
        m = Mirror::refresh_with(fx.join("src"), fx.join("mirror"), &options).unwrap();
    }
    for (path, entry) in m.baseline() {
        if entry.kind == EntryKind::File {
            assert_eq!(
                entry.hash.is_some(),
                mode == Mode::Recent,
                "{}",
                path.display()
            );
        }
    }
    m
}

/// A source folder `src/` with `files`, mirrored into `mirror/`.
fn setup(mode: Mode, files: &[(&str, &str)]) -> (Fixture, Mirror) {
    let fx = Fixture::new();
    fx.put("src/", "");
    for (p, c) in files {
        fx.put(&format!("src/{p}"), c);
    }
    let m = create(&fx, mode);
    (fx, m)
}

/// Each case becomes two tests, `recent::NAME` and `settled::NAME`: the conflict matrix must
/// hold whether contents or metadata decide (invariant 7).
macro_rules! matrix {
    ($($(#[doc = $doc:literal])* fn $name:ident($mode:ident) $body:block)*) => {
        mod recent {
            use super::*;
            $($(#[doc = $doc])* #[test] fn $name() { let $mode = Mode::Recent; $body })*
        }
        mod settled {
            use super::*;
            $($(#[doc = $doc])* #[test] fn $name() { let $mode = Mode::Settled; $body })*
        }
        mod refreshed {
            use super::*;
            $($(#[doc = $doc])* #[test] fn $name() { let $mode = Mode::Refreshed; $body })*
        }
    };
}

fn kind(k: ChangeKind) -> &'static str {
    match k {
        ChangeKind::Added => "A",
        ChangeKind::Modified => "M",
        ChangeKind::Deleted => "D",
        _ => "?",
    }
}

/// `["M a.txt", …]` and `["M a.txt ChangedInSource", …]`.
fn summary(r: &FinalizeReport) -> (Vec<String>, Vec<String>) {
    let applied = r
        .applied
        .iter()
        .map(|c| format!("{} {}", kind(c.kind), c.path.display()))
        .collect();
    let conflicts = r
        .conflicts
        .iter()
        .map(|c| {
            let reason = match &c.reason {
                ConflictReason::Dependent { on } => format!("Dependent({})", on.display()),
                other => format!("{other:?}"),
            };
            format!(
                "{} {} {reason}",
                kind(c.change.kind),
                c.change.path.display()
            )
        })
        .collect();
    (applied, conflicts)
}

fn finalize(m: &mut Mirror) -> (Vec<String>, Vec<String>) {
    summary(&m.finalize().unwrap())
}

const NONE: [&str; 0] = [];

fn set_mtime(path: &std::path::Path, to: std::time::SystemTime) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(to)
        .unwrap();
}

matrix! {
    fn create_copies_files_dirs_and_modes_but_not_git_or_symlinks(mode) {
        let fx = Fixture::new();
        fx.put("src/a.txt", "a");
        fx.put("src/empty/", "");
        fx.put("src/sub/b.sh", "b");
        fx.chmod("src/sub/b.sh", 0o751);
        fx.put("src/.git/config", "secret");
        fx.put("src/sub/.GIT/x", "secret");
        fx.put("outside/secret", "s");
        symlink(fx.join("outside"), fx.join("src/out")).unwrap();
        symlink(fx.join("outside/secret"), fx.join("src/sub/outfile")).unwrap();
        let m = create(&fx, mode);
        let listing = crate::util::listing(&fx.join("mirror"));
        assert_eq!(listing, ["a.txt", "empty/", "sub/", "sub/b.sh"]);
        assert_eq!(fx.mode("mirror/sub/b.sh"), 0o751);
        assert_eq!(
            m.baseline()[std::path::Path::new("out")].kind,
            EntryKind::Symlink
        );
        assert_eq!(
            m.baseline()[std::path::Path::new("sub/b.sh")].kind,
            EntryKind::File
        );
        assert!(m.changes().unwrap().is_empty());
    }

    fn changes_list_added_modified_deleted(mode) {
        let (fx, m) = setup(mode, &[("keep", "k"), ("edit", "e"), ("gone", "g"), ("d/x", "x")]);
        fs::write(fx.join("mirror/edit"), "E").unwrap();
        fs::remove_file(fx.join("mirror/gone")).unwrap();
        fx.put("mirror/new/file", "n");
        fx.chmod("mirror/d", 0o700);
        let got: Vec<String> = m
            .changes()
            .unwrap()
            .iter()
            .map(|c| format!("{} {} {:?}", kind(c.kind), c.path.display(), c.entry))
            .collect();
        assert_eq!(
            got,
            [
                "M d Dir",
                "M edit File",
                "D gone File",
                "A new Dir",
                "A new/file File"
            ]
        );
    }

    fn mirror_edit_with_source_untouched_is_written_back(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        fs::write(fx.join("mirror/a.txt"), "two").unwrap();
        assert_eq!(finalize(&mut m), (vec!["M a.txt".into()], vec![]));
        assert_eq!(fx.read("src/a.txt"), "two");
    }

    fn user_edited_the_same_file_conflicts_and_both_sides_stay(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        fs::write(fx.join("mirror/a.txt"), "mirror").unwrap();
        fs::write(fx.join("src/a.txt"), "user").unwrap();
        assert_eq!(
            finalize(&mut m),
            (vec![], vec!["M a.txt ChangedInSource".into()])
        );
        assert_eq!(fx.read("src/a.txt"), "user");
        assert_eq!(fx.read("mirror/a.txt"), "mirror");
    }

    fn user_touched_the_file_counts_as_a_change(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        fs::write(fx.join("mirror/a.txt"), "mirror").unwrap();
        let t = fs::File::options()
            .write(true)
            .open(fx.join("src/a.txt"))
            .unwrap();
        t.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
            .unwrap();
        assert_eq!(finalize(&mut m).1, ["M a.txt ChangedInSource"]);
        assert_eq!(fx.read("src/a.txt"), "one");
    }

    fn user_deleted_the_file_the_mirror_edited(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        fs::write(fx.join("mirror/a.txt"), "mirror").unwrap();
        fs::remove_file(fx.join("src/a.txt")).unwrap();
        assert_eq!(
            finalize(&mut m),
            (vec![], vec!["M a.txt DeletedInSource".into()])
        );
        assert!(!fx.join("src/a.txt").exists());
    }

    fn mirror_deleted_a_file_the_user_edited(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        fs::remove_file(fx.join("mirror/a.txt")).unwrap();
        fs::write(fx.join("src/a.txt"), "user").unwrap();
        assert_eq!(
            finalize(&mut m),
            (vec![], vec!["D a.txt ChangedInSource".into()])
        );
        assert_eq!(fx.read("src/a.txt"), "user");
    }

    fn both_deleted_is_no_conflict(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one"), ("b", "b")]);
        fs::remove_file(fx.join("mirror/a.txt")).unwrap();
        fs::remove_file(fx.join("mirror/b")).unwrap();
        fs::remove_file(fx.join("src/a.txt")).unwrap();
        assert_eq!(
            finalize(&mut m),
            (vec!["D a.txt".into(), "D b".into()], vec![])
        );
        assert!(!fx.join("src/b").exists());
    }

    fn user_created_a_file_where_the_mirror_added_one(mode) {
        let (fx, mut m) = setup(mode, &[]);
        fx.put("mirror/new.txt", "mirror");
        fx.put("src/new.txt", "user");
        assert_eq!(
            finalize(&mut m),
            (vec![], vec!["A new.txt CreatedInSource".into()])
        );
        assert_eq!(fx.read("src/new.txt"), "user");
        assert_eq!(fx.read("mirror/new.txt"), "mirror");
    }

    fn mirror_added_files_in_new_directories_with_their_modes(mode) {
        let (fx, mut m) = setup(mode, &[]);
        fx.put("mirror/n1/n2/f.sh", "run");
        fx.chmod("mirror/n1/n2/f.sh", 0o700);
        fx.chmod("mirror/n1/n2", 0o555);
        let (applied, conflicts) = finalize(&mut m);
        assert_eq!(applied, ["A n1", "A n1/n2", "A n1/n2/f.sh"]);
        assert_eq!(conflicts, NONE);
        assert_eq!(fx.read("src/n1/n2/f.sh"), "run");
        assert_eq!(fx.mode("src/n1/n2/f.sh"), 0o700);
        assert_eq!(fx.mode("src/n1/n2"), 0o555);
    }

    fn both_created_the_same_directory_merges(mode) {
        let (fx, mut m) = setup(mode, &[]);
        fx.put("mirror/d/from-mirror", "m");
        fx.put("src/d/from-user", "u");
        assert_eq!(
            finalize(&mut m),
            (vec!["A d".into(), "A d/from-mirror".into()], vec![])
        );
        assert_eq!(fx.read("src/d/from-user"), "u");
        assert_eq!(fx.read("src/d/from-mirror"), "m");
    }

    fn a_file_that_became_a_directory_in_the_mirror(mode) {
        let (fx, mut m) = setup(mode, &[("p", "file")]);
        fs::remove_file(fx.join("mirror/p")).unwrap();
        fx.put("mirror/p/inner", "i");
        assert_eq!(
            finalize(&mut m),
            (vec!["D p".into(), "A p".into(), "A p/inner".into()], vec![])
        );
        assert_eq!(fx.read("src/p/inner"), "i");
    }

    fn a_directory_that_became_a_file_in_the_mirror(mode) {
        let (fx, mut m) = setup(mode, &[("p/inner", "i"), ("p/deeper/x", "x")]);
        fs::remove_dir_all(fx.join("mirror/p")).unwrap();
        fx.put("mirror/p", "now a file");
        let (applied, conflicts) = finalize(&mut m);
        assert_eq!(conflicts, NONE);
        assert_eq!(
            applied,
            ["D p", "A p", "D p/deeper", "D p/deeper/x", "D p/inner"]
        );
        assert_eq!(fx.read("src/p"), "now a file");
    }

    fn type_change_over_a_file_the_user_edited_conflicts_with_its_dependents(mode) {
        let (fx, mut m) = setup(mode, &[("p", "file")]);
        fs::remove_file(fx.join("mirror/p")).unwrap();
        fx.put("mirror/p/inner", "i");
        fs::write(fx.join("src/p"), "user edit").unwrap();
        let (applied, conflicts) = finalize(&mut m);
        assert_eq!(applied, NONE);
        assert_eq!(
            conflicts,
            [
                "D p ChangedInSource",
                "A p Dependent(p)",
                "A p/inner Dependent(p)"
            ]
        );
        assert_eq!(fx.read("src/p"), "user edit");
    }

    fn user_turned_the_file_into_a_directory(mode) {
        let (fx, mut m) = setup(mode, &[("p", "file")]);
        fs::write(fx.join("mirror/p"), "mirror").unwrap();
        fs::remove_file(fx.join("src/p")).unwrap();
        fx.put("src/p/user", "u");
        assert_eq!(finalize(&mut m).1, ["M p ChangedInSource"]);
        assert_eq!(fx.read("src/p/user"), "u");
    }

    fn user_turned_a_directory_into_a_file_under_mirror_edits(mode) {
        let (fx, mut m) = setup(mode, &[("d/f", "f")]);
        fs::write(fx.join("mirror/d/f"), "mirror").unwrap();
        fs::remove_dir_all(fx.join("src/d")).unwrap();
        fx.put("src/d", "user file");
        assert_eq!(finalize(&mut m).1, ["M d/f UnsafePath"]);
        assert_eq!(fx.read("src/d"), "user file");
    }

    fn a_source_symlink_is_never_written_through_or_replaced(mode) {
        let fx = Fixture::new();
        fx.put("outside/target", "outside");
        fx.put("src/", "");
        symlink(fx.join("outside/target"), fx.join("src/link")).unwrap();
        symlink(fx.join("outside"), fx.join("src/dirlink")).unwrap();
        let mut m = create(&fx, mode);
        fx.put("mirror/link", "mirror");
        fx.put("mirror/dirlink/target", "mirror");
        let (applied, conflicts) = finalize(&mut m);
        assert_eq!(applied, NONE);
        assert_eq!(
            conflicts,
            [
                "A dirlink NotMirrored",
                "A dirlink/target NotMirrored",
                "A link NotMirrored"
            ]
        );
        assert_eq!(fx.read("outside/target"), "outside");
        assert!(
            fs::symlink_metadata(fx.join("src/link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    fn a_symlink_made_in_the_mirror_is_not_written_back(mode) {
        let (fx, mut m) = setup(mode, &[]);
        symlink("/etc/passwd", fx.join("mirror/pw")).unwrap();
        assert_eq!(finalize(&mut m).1, ["A pw UnsupportedType"]);
        assert!(fs::symlink_metadata(fx.join("src/pw")).is_err());
    }

    fn a_parent_replaced_by_a_symlink_after_the_mirror_is_refused(mode) {
        let (fx, mut m) = setup(mode, &[("d/f", "f")]);
        fx.put("outside/f", "f");
        fs::write(fx.join("mirror/d/f"), "mirror").unwrap();
        fs::rename(fx.join("src/d"), fx.join("moved")).unwrap();
        symlink(fx.join("outside"), fx.join("src/d")).unwrap();
        assert_eq!(finalize(&mut m).1, ["M d/f UnsafePath"]);
        assert_eq!(fx.read("outside/f"), "f");
    }

    fn empty_directories_are_added_and_removed(mode) {
        let (fx, mut m) = setup(mode, &[("old/", "")]);
        fs::remove_dir(fx.join("mirror/old")).unwrap();
        fx.put("mirror/new/", "");
        assert_eq!(
            finalize(&mut m),
            (vec!["A new".into(), "D old".into()], vec![])
        );
        assert!(fx.join("src/new").is_dir());
        assert!(!fx.join("src/old").exists());
    }

    fn a_deleted_directory_the_user_added_to_is_kept(mode) {
        let (fx, mut m) = setup(mode, &[("d/f", "f")]);
        fs::remove_dir_all(fx.join("mirror/d")).unwrap();
        fx.put("src/d/user-new", "u");
        let (applied, conflicts) = finalize(&mut m);
        assert_eq!(applied, ["D d/f"]);
        assert_eq!(conflicts, ["D d ChangedInSource"]);
        assert_eq!(fx.read("src/d/user-new"), "u");
    }

    fn permission_changes_go_back_and_a_users_chmod_conflicts(mode) {
        let (fx, mut m) = setup(mode, &[("run.sh", "x"), ("other.sh", "y")]);
        fx.chmod("mirror/run.sh", 0o755);
        fx.chmod("mirror/other.sh", 0o700);
        fx.chmod("src/other.sh", 0o600);
        let (applied, conflicts) = finalize(&mut m);
        assert_eq!(applied, ["M run.sh"]);
        assert_eq!(conflicts, ["M other.sh ChangedInSource"]);
        assert_eq!(fx.mode("src/run.sh"), 0o755);
        assert_eq!(fx.mode("src/other.sh"), 0o600);
    }

    fn a_git_directory_made_in_the_mirror_is_refused_in_any_case(mode) {
        let (fx, mut m) = setup(mode, &[("a", "a")]);
        fx.put("src/.git/HEAD", "ref");
        fx.put("mirror/.Git/hooks/pre-commit", "evil");
        fx.put("mirror/sub/.GIT", "evil");
        let (applied, conflicts) = finalize(&mut m);
        assert_eq!(applied, ["A sub"]);
        assert_eq!(
            conflicts,
            ["A .Git ForbiddenName", "A sub/.GIT ForbiddenName"]
        );
        assert_eq!(fx.read("src/.git/HEAD"), "ref");
        assert!(!fx.join("src/.Git").exists());
    }

    fn our_temporary_files_are_neither_mirrored_nor_written_back(mode) {
        let (fx, mut m) = setup(
            mode,
            &[
                ("a", "a"),
                (".agent-exec-wb-9f-0.tmp", "staged"),
                ("sub/.fsguard-9-0-1f.tmp", "temp"),
            ],
        );
        assert!(!fx.join("mirror/.agent-exec-wb-9f-0.tmp").exists());
        assert!(!fx.join("mirror/sub/.fsguard-9-0-1f.tmp").exists());
        assert!(fx.join("mirror/sub").is_dir());
        fx.put("mirror/.agent-exec-wb-1-1.tmp", "made by the command");
        fx.put("mirror/sub/.fsguard-1-1-1.tmp", "made by the command");
        let (applied, conflicts) = finalize(&mut m);
        assert_eq!(applied, NONE);
        assert_eq!(
            conflicts,
            [
                "A .agent-exec-wb-1-1.tmp ForbiddenName",
                "A sub/.fsguard-1-1-1.tmp ForbiddenName"
            ]
        );
        assert!(!fx.join("src/.agent-exec-wb-1-1.tmp").exists());
        assert_eq!(fx.read("src/.agent-exec-wb-9f-0.tmp"), "staged");
        assert_eq!(fx.read("src/sub/.fsguard-9-0-1f.tmp"), "temp");
    }

    fn a_second_finalize_compares_against_what_the_first_wrote(mode) {
        let (fx, mut m) = setup(mode, &[("a", "1")]);
        fs::write(fx.join("mirror/a"), "2").unwrap();
        assert_eq!(finalize(&mut m).0, ["M a"]);
        fs::write(fx.join("mirror/a"), "3").unwrap();
        assert_eq!(finalize(&mut m), (vec!["M a".into()], vec![]));
        assert_eq!(fx.read("src/a"), "3");
        assert!(m.changes().unwrap().is_empty());
    }

    /// ctime cannot be set from user space: restoring the mtime after a same-size rewrite
    /// does not hide the rewrite.
    fn a_same_size_rewrite_that_restores_the_mtime_is_still_a_users_change(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        let mtime = fs::metadata(fx.join("src/a.txt")).unwrap().modified().unwrap();
        fs::write(fx.join("mirror/a.txt"), "mirror").unwrap();
        fs::write(fx.join("src/a.txt"), "uno").unwrap();
        set_mtime(&fx.join("src/a.txt"), mtime);
        assert_eq!(finalize(&mut m), (vec![], vec!["M a.txt ChangedInSource".into()]));
        assert_eq!(fx.read("src/a.txt"), "uno");
        assert_eq!(fx.read("mirror/a.txt"), "mirror");
    }

    /// An editor's save-by-rename with the same size and mtime is a new inode.
    fn a_file_replaced_by_rename_with_the_same_size_and_mtime_is_a_users_change(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        let mtime = fs::metadata(fx.join("src/a.txt")).unwrap().modified().unwrap();
        fs::write(fx.join("mirror/a.txt"), "mirror").unwrap();
        fx.put("src/.a.txt.swp", "uno");
        set_mtime(&fx.join("src/.a.txt.swp"), mtime);
        fs::rename(fx.join("src/.a.txt.swp"), fx.join("src/a.txt")).unwrap();
        assert_eq!(finalize(&mut m).1, ["M a.txt ChangedInSource"]);
        assert_eq!(fx.read("src/a.txt"), "uno");
    }

    fn a_chmod_back_and_forth_by_the_user_is_a_change(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        fs::write(fx.join("mirror/a.txt"), "mirror").unwrap();
        let before = fx.mode("src/a.txt");
        fx.chmod("src/a.txt", 0o600);
        fx.chmod("src/a.txt", before);
        assert_eq!(finalize(&mut m).1, ["M a.txt ChangedInSource"]);
        assert_eq!(fx.read("src/a.txt"), "one");
    }

    /// The mirror side: a command that rewrites a copy with the same size and puts the mtime
    /// back still has its change written back.
    fn a_same_size_rewrite_in_the_mirror_that_restores_the_mtime_is_written_back(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one"), ("b.txt", "bee")]);
        let mtime = fs::metadata(fx.join("mirror/a.txt")).unwrap().modified().unwrap();
        fs::write(fx.join("mirror/a.txt"), "two").unwrap();
        set_mtime(&fx.join("mirror/a.txt"), mtime);
        assert_eq!(finalize(&mut m), (vec!["M a.txt".into()], vec![]));
        assert_eq!(fx.read("src/a.txt"), "two");
        assert_eq!(fx.read("src/b.txt"), "bee");
    }

    /// A copy whose content is what was copied is no change, whatever its times say.
    fn a_mirror_file_only_touched_is_not_a_change(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        set_mtime(
            &fx.join("mirror/a.txt"),
            std::time::SystemTime::now() + std::time::Duration::from_secs(60),
        );
        assert!(m.changes().unwrap().is_empty());
        assert_eq!(finalize(&mut m), (vec![], vec![]));
        assert_eq!(fx.read("src/a.txt"), "one");
    }

    /// Touched in the mirror, edited by the user: with only metadata recorded the copy's
    /// content is no longer known, so it may be reported — never written over the user's edit.
    fn a_mirror_file_touched_while_the_user_edited_it_never_overwrites_the_edit(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one")]);
        set_mtime(
            &fx.join("mirror/a.txt"),
            std::time::SystemTime::now() + std::time::Duration::from_secs(60),
        );
        fs::write(fx.join("src/a.txt"), "user").unwrap();
        let (applied, conflicts) = finalize(&mut m);
        assert_eq!(applied, NONE);
        let expected: &[&str] = match mode {
            Mode::Recent => &[],
            Mode::Settled | Mode::Refreshed => &["M a.txt ChangedInSource"],
        };
        assert_eq!(conflicts, expected);
        assert_eq!(fx.read("src/a.txt"), "user");
        assert_eq!(fx.read("mirror/a.txt"), "one");
    }

    fn a_replaced_source_folder_fails_finalize(mode) {
        let (fx, mut m) = setup(mode, &[("a", "1")]);
        fs::rename(fx.join("src"), fx.join("moved")).unwrap();
        fx.put("src/", "");
        assert!(matches!(m.finalize(), Err(MirrorError::Lease(_))));
    }

    /// Issue 14: write-back never writes through a hard link. A folder file that gained a
    /// name after the mirror was taken (its link count and ctime moved), or was replaced by
    /// another name of an outside file (another inode), no longer matches its baseline: a
    /// conflict, left as it is, and so is every other name of it.
    fn write_back_never_writes_through_a_hard_link_made_after_the_mirror(mode) {
        let (fx, mut m) = setup(mode, &[("a.txt", "one"), ("b.txt", "two"), ("c.txt", "three")]);
        fx.put("outside/secret", "SECRET");
        fs::write(fx.join("mirror/a.txt"), "mirror").unwrap();
        fs::remove_file(fx.join("mirror/b.txt")).unwrap();
        fs::write(fx.join("mirror/c.txt"), "mirror").unwrap();
        fs::hard_link(fx.join("src/a.txt"), fx.join("outside/alias-a")).unwrap();
        fs::hard_link(fx.join("src/b.txt"), fx.join("outside/alias-b")).unwrap();
        fs::remove_file(fx.join("src/c.txt")).unwrap();
        fs::hard_link(fx.join("outside/secret"), fx.join("src/c.txt")).unwrap();
        assert_eq!(
            finalize(&mut m),
            (
                vec![],
                vec![
                    "M a.txt ChangedInSource".to_owned(),
                    "D b.txt ChangedInSource".to_owned(),
                    "M c.txt ChangedInSource".to_owned(),
                ]
            )
        );
        for (path, content) in [
            ("src/a.txt", "one"),
            ("outside/alias-a", "one"),
            ("src/b.txt", "two"),
            ("outside/alias-b", "two"),
            ("src/c.txt", "SECRET"),
            ("outside/secret", "SECRET"),
        ] {
            assert_eq!(fx.read(path), content, "{path}");
        }
    }
}

/// The copy runs on several threads in batches of files: a wide directory and a deep one
/// must come out exact, every file with its content and mode, with nothing left to report.
#[test]
fn create_copies_a_wide_and_deep_tree_exactly() {
    let fx = Fixture::new();
    for i in 0..300 {
        fx.put(
            &format!("src/wide/f{i:03}"),
            &format!("{i}\n").repeat(i % 7),
        );
    }
    let mut deep = String::from("src");
    for d in 0..20 {
        deep.push_str(&format!("/d{d}"));
        fx.put(&format!("{deep}/file"), &format!("depth {d}"));
    }
    fx.chmod("src/wide/f007", 0o640);
    let m = Mirror::create(fx.join("src"), fx.join("mirror")).unwrap();
    let src = crate::util::listing(&fx.join("src"));
    assert_eq!(crate::util::listing(&fx.join("mirror")), src);
    assert_eq!(src.len(), 1 + 300 + 20 * 2);
    for entry in src.iter().filter(|e| !e.ends_with('/')) {
        assert_eq!(
            fs::read(fx.join("mirror").join(entry)).unwrap(),
            fs::read(fx.join("src").join(entry)).unwrap(),
            "{entry}"
        );
    }
    assert_eq!(fx.mode("mirror/wide/f007"), 0o640);
    assert_eq!(m.baseline().len(), src.len());
    assert!(m.changes().unwrap().is_empty());
}

#[test]
fn an_existing_destination_is_refused() {
    let fx = Fixture::new();
    fx.put("src/", "");
    fx.put("mirror/", "");
    assert!(matches!(
        Mirror::create(fx.join("src"), fx.join("mirror")),
        Err(MirrorError::DestinationExists { .. })
    ));
}

#[test]
fn a_mirror_inside_its_source_is_not_copied_into_itself() {
    let fx = Fixture::new();
    fx.put("src/a", "a");
    let m = Mirror::create(fx.join("src"), fx.join("src/.mirror")).unwrap();
    assert_eq!(crate::util::listing(&fx.join("src/.mirror")), ["a"]);
    drop(m);
}

/// Issue 15, item 5: a path the mirror skipped says what it is, so a tool can answer "not
/// mirrored: a FIFO" instead of "does not exist".
#[test]
fn a_skipped_entry_says_what_it_is_and_a_copied_one_nothing() {
    use fsguard::NotCopied;
    use std::path::Path;
    let fx = Fixture::new();
    fx.put("src/a.txt", "a");
    fx.put("src/d/b.txt", "b");
    std::process::Command::new("mkfifo")
        .arg(fx.join("src/pipe"))
        .status()
        .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(fx.join("src/sock")).unwrap();
    symlink("d", fx.join("src/link")).unwrap();
    let m = Mirror::create(fx.join("src"), fx.join("mirror")).unwrap();
    let got = |p: &str| m.not_copied(Path::new(p));
    assert_eq!(got("pipe"), Some(("pipe".into(), NotCopied::Fifo)));
    assert_eq!(got("sock"), Some(("sock".into(), NotCopied::Socket)));
    assert_eq!(got("link/b.txt"), Some(("link".into(), NotCopied::Symlink)));
    assert_eq!(got("a.txt"), None);
    assert_eq!(got("d/b.txt"), None);
    assert_eq!(got("never/was"), None);
    assert_eq!(NotCopied::Fifo.to_string(), "a FIFO");
}
