//! Measures what attaching the seccomp filter costs: forks N children, and each one times only
//! its `seccomp(SECCOMP_SET_MODE_FILTER)` call (the kernel checks, converts, JITs and, since
//! Linux 5.11, pre-evaluates the program for every syscall number at that moment, so the cost
//! grows with the program's length and with how far an allowed call walks through it). Prints
//! the median per program, with a one-instruction `RET ALLOW` filter as the baseline of the same
//! run. Run: `cargo run --release -p linux-sandbox --example seccomp_attach -- 400`.

use std::time::Duration;

use linux_sandbox::{Policy, probe};

/// Forks one child that sets `no_new_privs`, then times attaching `program`; returns the time.
fn attach_once(program: &[libc::sock_filter]) -> Result<Duration, Box<dyn std::error::Error>> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let fprog = libc::sock_fprog {
        len: u16::try_from(program.len())?,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: this example is single-threaded; the child makes only raw syscalls (prctl,
    // clock_gettime, seccomp, write, _exit) on memory that exists before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    if pid == 0 {
        // SAFETY: async-signal-safe calls only; `_exit` never returns.
        unsafe {
            let mut start: libc::timespec = std::mem::zeroed();
            let mut end: libc::timespec = std::mem::zeroed();
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut start);
            let ret = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &fprog as *const libc::sock_fprog,
            );
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut end);
            let nanos: i64 = if ret == 0 {
                (end.tv_sec - start.tv_sec) * 1_000_000_000 + (end.tv_nsec - start.tv_nsec)
            } else {
                -1
            };
            libc::write(fds[1], (&nanos as *const i64).cast(), 8);
            libc::_exit(0);
        }
    }
    let mut nanos = [0u8; 8];
    // SAFETY: closing our write end; reading 8 bytes into a local buffer; waiting for our child.
    let read = unsafe {
        libc::close(fds[1]);
        let read = libc::read(fds[0], nanos.as_mut_ptr().cast(), 8);
        libc::close(fds[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        read
    };
    let nanos = i64::from_ne_bytes(nanos);
    if read != 8 || nanos < 0 {
        return Err("seccomp(SECCOMP_SET_MODE_FILTER) failed in the child".into());
    }
    Ok(Duration::from_nanos(u64::try_from(nanos)?))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(300), |s| s.parse())?;
    println!("{}\n", probe());
    let command = Policy::new().prepare()?;
    let run = Policy::single_program("/usr/bin/true").prepare()?;
    let minimal = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let programs: [(&str, &[libc::sock_filter]); 3] = [
        ("RET ALLOW (baseline)", &minimal),
        ("command filter", command.seccomp_program()),
        ("run filter", run.seccomp_program()),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); programs.len()];
    // Interleaved, so machine load hits every program alike.
    for _ in 0..n {
        for (i, (_, program)) in programs.iter().enumerate() {
            samples[i].push(attach_once(program)?);
        }
    }
    println!("median attach time of {n} children:");
    for ((name, program), mut times) in programs.iter().zip(samples) {
        times.sort();
        println!(
            "  {name:22} {:4} instructions  {:?}",
            program.len(),
            times[times.len() / 2]
        );
    }
    Ok(())
}
