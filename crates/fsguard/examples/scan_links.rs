//! `scan_links ROOT...`: prints every regular file with more than one link under the roots, one
//! path per line — the same set `find ROOT -type f -links +1` prints, in sorted order. Exit 0;
//! on error (a root that is not a directory, an unreadable directory) the error goes to stderr
//! and the exit status is 1 (also for a missing ROOT). Used by `cargo xtask bench scan`.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let roots: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if roots.is_empty() {
        eprintln!("usage: scan_links ROOT...");
        return ExitCode::FAILURE;
    }
    match fsguard::scan_hard_links(&roots, &fsguard::ScanOptions::new()) {
        Ok(report) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            for link in &report.links {
                let line = link.path.as_os_str().as_bytes();
                if out
                    .write_all(line)
                    .and_then(|()| out.write_all(b"\n"))
                    .is_err()
                {
                    return ExitCode::FAILURE;
                }
            }
            if out.flush().is_err() {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("scan_links: {e}");
            ExitCode::FAILURE
        }
    }
}
