//! `RelPath`: validation properties and opening without following links (RUN-4).

use std::ffi::OsStr;
use std::fs;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, symlink};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use fsguard::{OpenError, RelPath, RelPathError};
use proptest::prelude::*;

use crate::util::Fixture;

/// Resolves `path` lexically against a root at depth 0; `None` if it ever climbs above it.
fn lexical_depth(path: &[u8]) -> Option<usize> {
    if path.first() == Some(&b'/') {
        return None;
    }
    let mut depth: usize = 0;
    for c in path.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => depth = depth.checked_sub(1)?,
            _ => depth += 1,
        }
    }
    Some(depth)
}

fn component() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"a".to_vec()),
        Just(b"..".to_vec()),
        Just(b".".to_vec()),
        Just(b"".to_vec()),
        Just(b".git".to_vec()),
        Just(b"..a".to_vec()),
        Just(b"a..".to_vec()),
        Just(b"...".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..6),
    ]
}

fn git_variant() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(any::<bool>(), 4), 0usize..3).prop_map(|(upper, tail)| {
        let mut v = b".".to_vec();
        for (c, up) in b"git".iter().zip(&upper[1..]) {
            v.push(if *up { c.to_ascii_uppercase() } else { *c });
        }
        // NTFS drops trailing dots and spaces.
        v.extend(std::iter::repeat_n(
            if upper[0] { b'.' } else { b' ' },
            tail,
        ));
        v
    })
}

proptest! {
    #[test]
    fn no_accepted_path_resolves_outside_the_root(
        comps in proptest::collection::vec(component(), 1..8),
        absolute in any::<bool>(),
    ) {
        let mut input = if absolute { b"/".to_vec() } else { Vec::new() };
        input.extend(comps.join(&b'/'));
        if let Ok(p) = RelPath::new(OsStr::from_bytes(&input)) {
            prop_assert!(lexical_depth(&input).is_some(), "{:?} accepted but escapes", input);
            let norm = p.as_path().as_os_str().as_bytes().to_vec();
            prop_assert!(lexical_depth(&norm).is_some());
            prop_assert!(!p.as_path().is_absolute());
            prop_assert!(p.components().all(|c| c != ".." && c != "." && !c.is_empty()));
            prop_assert!(!norm.contains(&0));
        }
    }

    #[test]
    fn no_any_case_dot_git_component_is_ever_accepted(
        before in proptest::collection::vec("[a-z]{1,5}", 0..4),
        git in git_variant(),
        after in proptest::collection::vec("[a-z]{1,5}", 0..4),
    ) {
        let mut input = before.join("/").into_bytes();
        if !input.is_empty() { input.push(b'/'); }
        input.extend(&git);
        for a in &after { input.push(b'/'); input.extend(a.as_bytes()); }
        let err = RelPath::new(OsStr::from_bytes(&input)).unwrap_err();
        prop_assert_eq!(err, RelPathError::GitDir { component: OsStr::from_bytes(&git).to_os_string() });
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_accepted_components_are_bounded(
        input in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        if let Ok(p) = RelPath::new(OsStr::from_bytes(&input)) {
            for c in p.components() {
                prop_assert!(c.len() <= fsguard::MAX_COMPONENT_BYTES);
                prop_assert!(c != "..");
            }
        }
    }
}

#[test]
fn open_dir_at_refuses_a_symlink_in_any_position() {
    let fx = Fixture::new();
    fx.put("a/b/c/", "");
    fx.put("outside/secret", "s");
    symlink(fx.join("outside"), fx.join("a/link")).unwrap();
    symlink("b", fx.join("a/rel")).unwrap();
    let root = fx.root_fd();
    for (path, at) in [
        ("a/link", "a/link"),
        ("a/link/x", "a/link"),
        ("a/rel/c", "a/rel"),
    ] {
        let err = RelPath::new(path).unwrap().open_dir_at(&root).unwrap_err();
        assert!(matches!(err, OpenError::Symlink { .. }), "{path}: {err:?}");
        assert_eq!(err.component(), std::path::Path::new(at));
    }
    let err = RelPath::new("a/link/secret")
        .unwrap()
        .open_file_at(&root)
        .unwrap_err();
    assert!(matches!(err, OpenError::Symlink { .. }), "{err:?}");
}

#[test]
fn open_errors_name_the_offending_component() {
    let fx = Fixture::new();
    fx.put("a/file", "x");
    let root = fx.root_fd();
    let err = RelPath::new("a/missing/x")
        .unwrap()
        .open_dir_at(&root)
        .unwrap_err();
    assert!(matches!(err, OpenError::NotFound { .. }));
    assert_eq!(err.component(), std::path::Path::new("a/missing"));
    let err = RelPath::new("a/file/x")
        .unwrap()
        .open_file_at(&root)
        .unwrap_err();
    assert!(matches!(err, OpenError::NotADirectory { .. }));
    assert_eq!(err.component(), std::path::Path::new("a/file"));
    assert!(err.to_string().contains("a/file"));
    let err = RelPath::new("a").unwrap().open_file_at(&root).unwrap_err();
    assert!(matches!(err, OpenError::NotARegularFile { .. }));
}

#[test]
fn open_file_at_refuses_a_fifo_without_blocking() {
    let fx = Fixture::new();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fx.join("fifo").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let err = RelPath::new("fifo")
        .unwrap()
        .open_file_at(fx.root_fd())
        .unwrap_err();
    assert!(matches!(err, OpenError::NotARegularFile { .. }), "{err:?}");
}

#[test]
fn symlink_loops_are_refused_not_followed() {
    let fx = Fixture::new();
    symlink("b", fx.join("a")).unwrap();
    symlink("a", fx.join("b")).unwrap();
    let err = RelPath::new("a/x")
        .unwrap()
        .open_file_at(fx.root_fd())
        .unwrap_err();
    assert!(matches!(err, OpenError::Symlink { .. }), "{err:?}");
}

#[test]
fn non_utf8_names_open_byte_for_byte() {
    let fx = Fixture::new();
    let name = OsStr::from_bytes(b"caf\xe9.txt");
    fs::write(fx.path().join(name), "latin1").unwrap();
    let p = RelPath::new(name).unwrap();
    let mut s = String::new();
    std::io::Read::read_to_string(&mut p.open_file_at(fx.root_fd()).unwrap(), &mut s).unwrap();
    assert_eq!(s, "latin1");
}

/// A thread swaps `sub` between a real directory and a symlink to an outside directory with
/// `RENAME_EXCHANGE` as fast as it can while the test opens through `sub`: every open either
/// fails or lands in the real directory, never outside (RUN-4, no check-then-use window).
#[test]
fn swapping_a_directory_for_a_symlink_in_a_loop_never_escapes() {
    let fx = Fixture::new();
    fx.put("root/sub/inner/file", "inside");
    fx.put("outside/inner/file", "OUTSIDE");
    symlink(fx.join("outside"), fx.join("root/swap")).unwrap();
    let root = fs::File::open(fx.join("root")).unwrap();
    let inside_ino = fs::metadata(fx.join("root/sub/inner")).unwrap().ino();
    let outside_ino = fs::metadata(fx.join("outside/inner")).unwrap().ino();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = Arc::clone(&stop);
        let dir = fs::File::open(fx.join("root")).unwrap();
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let swapped = rustix::fs::renameat_with(
                    &dir,
                    "sub",
                    &dir,
                    "swap",
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                if swapped.is_err() {
                    break; // the fixture is gone: the test already failed
                }
                swaps += 1;
            }
            swaps
        })
    };
    let (mut ok, mut refused) = (0u32, 0u32);
    let dir_path = RelPath::new("sub/inner").unwrap();
    let file_path = RelPath::new("sub/inner/file").unwrap();
    for _ in 0..20_000 {
        match dir_path.open_dir_at(&root) {
            Ok(fd) => {
                let ino = rustix::fs::fstat(fd.as_fd()).unwrap().st_ino;
                assert_eq!(
                    ino,
                    inside_ino,
                    "escaped to {}",
                    if ino == outside_ino { "outside" } else { "?" }
                );
                ok += 1;
            }
            // Refused while `sub` was the link; the error's wording looks again after the
            // refusal, so a swap back in between words it "not a directory".
            Err(OpenError::Symlink { .. } | OpenError::NotADirectory { .. }) => refused += 1,
            Err(e) => panic!("unexpected {e:?}"),
        }
        match file_path.open_file_at(&root) {
            Ok(mut f) => {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut f, &mut s).unwrap();
                assert_eq!(s, "inside");
            }
            Err(OpenError::Symlink { .. } | OpenError::NotADirectory { .. }) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    eprintln!("opened {ok}, refused {refused}, swaps {swaps}");
    assert!(swaps > 0);
}
