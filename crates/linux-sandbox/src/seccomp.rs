//! The seccomp half: a deny-list of system calls that no sandboxed tool needs and that each lead
//! out of a Landlock sandbox or act on the whole machine, compiled with `seccompiler` in the
//! parent into one classic BPF program that the child installs with one raw syscall.
//!
//! Why a deny-list and not an allow-list: the `command` tool runs arbitrary programs (`git`,
//! `python3`, compilers), whose syscall needs change with every libc; Landlock is the
//! deny-default layer for files, seccomp closes what Landlock does not see (DESIGN, platform
//! matrix).
//!
//! Three parts, because a seccompiler filter has a single match action, chained into one
//! program (see `chain`):
//! 1. `EPERM` for the deny-list (with argument checks for `clone`, `socket`, `ioctl`);
//! 2. `ENOSYS` for `clone3`, whose flags live in memory that seccomp cannot read, so that libc
//!    falls back to `clone`, whose flags it can check;
//! 3. on x86_64, `ENOSYS` for x32 system calls (numbers with bit 30 set): they share
//!    `AUDIT_ARCH_X86_64` with native calls, so without this guard `link` through its x32 number
//!    would slip past a deny-list keyed on native numbers. 32-bit (`int 0x80`) calls carry another
//!    arch value and seccompiler's arch check kills the process.

use std::collections::BTreeMap;
use std::sync::Mutex;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

use crate::SandboxError;
use crate::policy::Network;

/// Inputs of the filter that vary between policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FilterOptions {
    pub(crate) network: Network,
    pub(crate) may_spawn: bool,
    /// Whether Landlock restricts connecting to pathname unix sockets (ABI ≥ 9); without it
    /// `socket(AF_UNIX)` is refused in [`Network::None`] mode.
    pub(crate) landlock_restricts_unix_connect: bool,
}

/// System calls refused with `EPERM` whatever the policy (issue 4, linux-sandbox item 3, plus
/// the root-only calls that act on the whole machine, because tests and some users run as root).
fn always_denied() -> Vec<i64> {
    let mut list = vec![
        // Hard links: Landlock allows `link` inside one writable directory (SPEC CMD-9).
        libc::SYS_linkat,
        // io_uring performs file and network operations that bypass seccomp argument checks.
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        // Reaching into other processes.
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_process_madvise,
        libc::SYS_pidfd_getfd,
        libc::SYS_kcmp,
        // Mount family: a new mount would change what the Landlock paths mean.
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_chroot,
        // Namespaces (`clone` with namespace flags is handled with its argument below).
        libc::SYS_unshare,
        libc::SYS_setns,
        // Kernel keyrings hold the user's credentials (Kerberos, fscrypt).
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        // Kernel attack surface no tool needs.
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        // File handles open any file on a mount by number (the "shocker" escape); Landlock would
        // still check the path, but there is no reason to offer it.
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_fanotify_init,
        // Root-only calls that act on the whole machine.
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_clock_adjtime,
        libc::SYS_adjtimex,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_syslog,
        libc::SYS_vhangup,
    ];
    #[cfg(target_arch = "x86_64")]
    list.extend([libc::SYS_link, libc::SYS_iopl, libc::SYS_ioperm]);
    list
}

/// `CLONE_NEW*` flags that `clone` (not `clone3`) accepts. `CLONE_NEWTIME` is left out: it shares
/// its bit with the exit signal in `clone` and only works through `clone3`, which gets `ENOSYS`.
const CLONE_NAMESPACE_FLAGS: [i32; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// `TIOCSTI` pushes bytes into a terminal's input queue, `TIOCLINUX` can too (console
/// selection): either types commands into the user's shell if the sandbox holds its terminal.
const TERMINAL_INJECTION_IOCTLS: [u64; 2] = [libc::TIOCSTI, libc::TIOCLINUX];

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    // Every argument checked here is an `int`/`unsigned int` in the kernel, which ignores the
    // upper half of the register: compare only the low 32 bits, so garbage in the upper half
    // cannot dodge an `Eq`.
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    Ok(SeccompRule::new(conditions)?)
}

/// A C `int` flag or constant (all non-negative here) as a seccomp comparison value.
fn bits(value: i32) -> u64 {
    u64::from(value as u32)
}

fn flag_set(arg: u8, flag: i32) -> Result<SeccompRule, SandboxError> {
    let flag = bits(flag);
    rule(vec![condition(arg, SeccompCmpOp::MaskedEq(flag), flag)?])
}

pub(crate) fn target_arch() -> Result<TargetArch, SandboxError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|_| SandboxError::SeccompUnavailable {
        reason: format!(
            "no seccomp filter for architecture {}",
            std::env::consts::ARCH
        ),
    })
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )?;
    let program: seccompiler::BpfProgram = filter.try_into()?;
    Ok(program
        .into_iter()
        .map(|insn| libc::sock_filter {
            code: insn.code,
            jt: insn.jt,
            jf: insn.jf,
            k: insn.k,
        })
        .collect())
}

/// The EPERM deny-list for one policy.
pub(crate) fn eperm_rules(
    options: FilterOptions,
) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in always_denied() {
        rules.insert(nr, Vec::new());
    }

    let mut clone_rules = CLONE_NAMESPACE_FLAGS
        .iter()
        .map(|&flag| flag_set(0, flag))
        .collect::<Result<Vec<_>, _>>()?;
    if !options.may_spawn {
        // A new process is a `clone` without CLONE_THREAD; threads keep working (SPEC RUN-7).
        let thread = bits(libc::CLONE_THREAD);
        clone_rules.push(rule(vec![condition(
            0,
            SeccompCmpOp::MaskedEq(thread),
            0,
        )?])?);
        #[cfg(target_arch = "x86_64")]
        {
            rules.insert(libc::SYS_fork, Vec::new());
            rules.insert(libc::SYS_vfork, Vec::new());
        }
    }
    rules.insert(libc::SYS_clone, clone_rules);

    rules.insert(
        libc::SYS_ioctl,
        TERMINAL_INJECTION_IOCTLS
            .iter()
            .map(|&request| rule(vec![condition(1, SeccompCmpOp::Eq, request)?]))
            .collect::<Result<Vec<_>, _>>()?,
    );

    if options.network == Network::None {
        let unix = bits(libc::AF_UNIX);
        let not_unix = vec![rule(vec![condition(0, SeccompCmpOp::Ne, unix)?])?];
        rules.insert(libc::SYS_socketpair, not_unix.clone());
        if options.landlock_restricts_unix_connect {
            rules.insert(libc::SYS_socket, not_unix);
        } else {
            // Empty rule list: refused for every family (see `Network::None`).
            rules.insert(libc::SYS_socket, Vec::new());
        }
    }
    Ok(rules)
}

/// [`build`], computed once per option set and copied out after that: the program depends
/// only on the options and the architecture, while `prepare` runs for every command (the
/// ruleset, by contrast, is built per call: its paths differ).
pub(crate) fn build_cached(options: FilterOptions) -> Result<Vec<libc::sock_filter>, SandboxError> {
    type Cache = Vec<(FilterOptions, Vec<libc::sock_filter>)>;
    static CACHE: Mutex<Cache> = Mutex::new(Vec::new());
    let hit = CACHE.lock().ok().and_then(|cache| {
        cache
            .iter()
            .find(|(o, _)| *o == options)
            .map(|(_, filter)| filter.clone())
    });
    if let Some(filter) = hit {
        return Ok(filter);
    }
    let filter = build(options)?;
    if let Ok(mut cache) = CACHE.lock() {
        cache.push((options, filter.clone()));
    }
    Ok(filter)
}

/// The whole filter as one BPF program.
pub(crate) fn build(options: FilterOptions) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let arch = target_arch()?;
    let eperm = eperm_rules(options)?;
    let mut enosys = BTreeMap::new();
    enosys.insert(libc::SYS_clone3, Vec::new());
    let mut listed: Vec<i64> = eperm.keys().chain(enosys.keys()).copied().collect();
    listed.sort_unstable();

    let mut parts = Vec::with_capacity(4);
    // The x32 guard comes first: the fast path below allows every unlisted number.
    #[cfg(target_arch = "x86_64")]
    parts.push(Part::FallThrough(x32_guard()));
    parts.extend(fast_path(arch, &listed).map(Part::Final));
    parts.push(Part::FallThrough(compile(eperm, libc::EPERM, arch)?));
    parts.push(Part::Final(compile(enosys, libc::ENOSYS, arch)?));
    Ok(chain(parts))
}

/// A binary search over the listed syscall numbers that allows every other native call at once.
///
/// Why: seccompiler tests numbers one after another, so an unlisted call walks about 70
/// comparisons. The kernel pays that walk for every syscall number when it attaches the filter
/// (it precomputes which calls are always allowed), which made attaching cost ~330 µs, most of
/// the sandbox's spawn overhead; with this search each walk is about 7 comparisons. Pure
/// optimisation: listed numbers and other arches fall through to the full program, and `None`
/// (no fast path) is returned if a jump would not fit BPF's 8-bit offsets.
fn fast_path(arch: TargetArch, listed: &[i64]) -> Option<Vec<libc::sock_filter>> {
    let audit_arch = match arch {
        TargetArch::x86_64 => 62 | 0x8000_0000 | 0x4000_0000,
        TargetArch::aarch64 => 183 | 0x8000_0000 | 0x4000_0000,
        TargetArch::riscv64 => 243 | 0x8000_0000 | 0x4000_0000,
    };
    let numbers: Vec<u32> = listed
        .iter()
        .map(|&nr| u32::try_from(nr).ok())
        .collect::<Option<_>>()?;
    let tree = search(&numbers)?;
    let mut out = vec![
        insn(LD_ABS, 0, 0, 4), // seccomp_data.arch
        insn(JEQ, 1, 0, audit_arch),
        // Another arch: the full program decides (and kills it).
        insn(JA, 0, 0, u32::try_from(tree.len() + 1).ok()?),
        insn(LD_ABS, 0, 0, 0), // seccomp_data.nr
    ];
    let tree_start = out.len();
    out.extend(tree);
    // `search` leaves `JA 0` placeholders meaning "listed: go to the full program".
    let end = out.len();
    for (at, instruction) in out.iter_mut().enumerate().skip(tree_start) {
        if instruction.code == JA && instruction.k == u32::MAX {
            instruction.k = u32::try_from(end - at - 1).ok()?;
        }
    }
    Some(out)
}

const LD_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Code that, with the syscall number in A, ends in `RET ALLOW` for numbers not in `sorted`
/// and in a `JA u32::MAX` placeholder (patched by `fast_path`) for numbers in it.
fn search(sorted: &[u32]) -> Option<Vec<libc::sock_filter>> {
    if sorted.len() <= 4 {
        // JEQ v_i → the placeholder after RET ALLOW.
        let mut out = Vec::with_capacity(sorted.len() + 2);
        for (i, &value) in sorted.iter().enumerate() {
            out.push(insn(JEQ, u8::try_from(sorted.len() - i).ok()?, 0, value));
        }
        out.push(insn(RET, 0, 0, libc::SECCOMP_RET_ALLOW));
        out.push(insn(JA, 0, 0, u32::MAX));
        return Some(out);
    }
    let (low, high) = sorted.split_at(sorted.len() / 2);
    let left = search(low)?;
    let right = search(high)?;
    let mut out = Vec::with_capacity(left.len() + right.len() + 1);
    out.push(insn(JGE, u8::try_from(left.len()).ok()?, 0, high[0]));
    out.extend(left);
    out.extend(right);
    Some(out)
}

/// One piece of the chained program.
#[derive(Debug)]
pub(crate) enum Part {
    /// Its `RET ALLOW`s mean "no objection": go on to the next part.
    FallThrough(Vec<libc::sock_filter>),
    /// Its `RET ALLOW`s are final (the fast path, the last part).
    Final(Vec<libc::sock_filter>),
}

/// Joins programs into one that answers like the first part that does not allow the call.
///
/// Why one program: each attached filter costs a fixed 20–40 µs on top of its length (measured
/// here with synthetic filters), and every syscall later runs every attached filter. The parts
/// refuse disjoint sets of calls, so "first refusal wins" equals the kernel's "most restrictive
/// filter wins" for them.
///
/// How: in every fall-through part, each `RET ALLOW` becomes `JA` to the part's end, which is
/// the next part's first instruction. Instruction counts do not change, so the parts' own
/// relative jumps stay valid.
pub(crate) fn chain(parts: Vec<Part>) -> Vec<libc::sock_filter> {
    let ret_allow = libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    };
    let mut out = Vec::new();
    for part in parts {
        let part = match part {
            Part::Final(part) => part,
            Part::FallThrough(mut part) => {
                let len = part.len();
                for (at, insn) in part.iter_mut().enumerate() {
                    if insn.code == ret_allow.code && insn.k == ret_allow.k {
                        *insn = libc::sock_filter {
                            code: (libc::BPF_JMP | libc::BPF_JA) as u16,
                            jt: 0,
                            jf: 0,
                            // `at < len`, and programs are far shorter than u32::MAX.
                            k: (len - at - 1) as u32,
                        };
                    }
                }
                part
            }
        };
        out.extend(part);
    }
    out
}

/// Hand-written because seccompiler matches syscall numbers exactly and cannot express a range.
#[cfg(target_arch = "x86_64")]
fn x32_guard() -> Vec<libc::sock_filter> {
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const ARCH_OFFSET: u32 = 4; // offsetof(struct seccomp_data, arch)
    const NR_OFFSET: u32 = 0; // offsetof(struct seccomp_data, nr)
    let ld = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let jeq = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    let jge = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    let ret = (libc::BPF_RET | libc::BPF_K) as u16;
    let insn = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    vec![
        insn(ld, 0, 0, ARCH_OFFSET),
        // Another arch: not ours to judge here (the EPERM program kills it).
        insn(jeq, 0, 3, AUDIT_ARCH_X86_64),
        insn(ld, 0, 0, NR_OFFSET),
        insn(jge, 0, 1, X32_SYSCALL_BIT),
        insn(ret, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        insn(ret, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    //! The compiled programs run in a small classic-BPF interpreter (Chromium's bpf_dsl tests
    //! do the same), so each rule is pinned without starting a process; the escape suite in
    //! `tests/` checks the same rules against the kernel.
    use super::*;

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

    #[test]
    fn cached_program_is_the_program_built_for_the_same_options() {
        let key = |p: &[libc::sock_filter]| -> Vec<(u16, u8, u8, u32)> {
            p.iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect()
        };
        for network in [Network::None, Network::All] {
            for may_spawn in [false, true] {
                for landlock_restricts_unix_connect in [false, true] {
                    let options = FilterOptions {
                        network,
                        may_spawn,
                        landlock_restricts_unix_connect,
                    };
                    let built = key(&build(options).unwrap());
                    assert_eq!(key(&build_cached(options).unwrap()), built);
                    assert_eq!(key(&build_cached(options).unwrap()), built);
                }
            }
        }
    }
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

    /// Runs one program over a `struct seccomp_data` (little-endian).
    fn run_program(program: &[libc::sock_filter], data: &[u8; 64]) -> u32 {
        run_counting(program, data).0
    }

    /// The verdict and the number of instructions executed.
    fn run_counting(program: &[libc::sock_filter], data: &[u8; 64]) -> (u32, usize) {
        let mut a: u32 = 0;
        let mut pc = 0usize;
        let mut steps = 0;
        loop {
            steps += 1;
            let insn = program[pc];
            let code = u32::from(insn.code);
            match code & 0x07 {
                0x00 => {
                    // BPF_LD | BPF_W | BPF_ABS
                    assert_eq!(code, libc::BPF_LD | libc::BPF_W | libc::BPF_ABS);
                    let at = insn.k as usize;
                    a = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                    pc += 1;
                }
                0x04 => {
                    assert_eq!(code, libc::BPF_ALU | libc::BPF_AND | libc::BPF_K);
                    a &= insn.k;
                    pc += 1;
                }
                0x05 => {
                    let op = code & 0xf0;
                    if op == libc::BPF_JA {
                        pc += 1 + insn.k as usize;
                        continue;
                    }
                    let taken = match op {
                        libc::BPF_JEQ => a == insn.k,
                        libc::BPF_JGE => a >= insn.k,
                        libc::BPF_JGT => a > insn.k,
                        libc::BPF_JSET => a & insn.k != 0,
                        other => panic!("unexpected jump {other:#x}"),
                    };
                    pc += 1 + usize::from(if taken { insn.jt } else { insn.jf });
                }
                0x06 => return (insn.k, steps),
                other => panic!("unexpected class {other:#x}"),
            }
        }
    }

    /// Runs the program on one call.
    fn verdict(options: FilterOptions, arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as u32).to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, arg) in args.iter().enumerate() {
            data[16 + i * 8..24 + i * 8].copy_from_slice(&arg.to_le_bytes());
        }
        run_program(&build(options).unwrap(), &data)
    }

    #[cfg(target_arch = "x86_64")]
    const NATIVE: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    #[cfg(target_arch = "aarch64")]
    const NATIVE: u32 = 183 | 0x8000_0000 | 0x4000_0000;

    const COMMAND: FilterOptions = FilterOptions {
        network: Network::None,
        may_spawn: true,
        landlock_restricts_unix_connect: false,
    };
    const RUN: FilterOptions = FilterOptions {
        may_spawn: false,
        ..COMMAND
    };

    fn check(options: FilterOptions, nr: i64, args: [u64; 6], expected: u32) {
        let got = verdict(options, NATIVE, nr, args);
        assert_eq!(
            got, expected,
            "syscall {nr} {args:x?} under {options:?}: got {got:#x}, want {expected:#x}"
        );
    }

    fn a0(x: u64) -> [u64; 6] {
        [x, 0, 0, 0, 0, 0]
    }

    #[test]
    fn always_denied_calls_get_eperm_and_ordinary_calls_pass() {
        for nr in always_denied() {
            check(COMMAND, nr, a0(0), EPERM);
            check(RUN, nr, a0(0), EPERM);
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_kill,
        ] {
            check(COMMAND, nr, a0(0), ALLOW);
        }
    }

    #[test]
    fn clone_with_namespace_flags_is_refused_and_threads_are_not() {
        let sigchld = bits(libc::SIGCHLD);
        let thread = bits(
            libc::CLONE_VM
                | libc::CLONE_FS
                | libc::CLONE_FILES
                | libc::CLONE_SIGHAND
                | libc::CLONE_THREAD
                | libc::CLONE_SYSVSEM,
        );
        for flag in CLONE_NAMESPACE_FLAGS {
            check(COMMAND, libc::SYS_clone, a0(bits(flag) | sigchld), EPERM);
            check(RUN, libc::SYS_clone, a0(bits(flag) | thread), EPERM);
        }
        check(COMMAND, libc::SYS_clone, a0(sigchld), ALLOW);
        check(COMMAND, libc::SYS_clone, a0(thread), ALLOW);
        check(RUN, libc::SYS_clone, a0(sigchld), EPERM);
        check(RUN, libc::SYS_clone, a0(thread), ALLOW);
        // clone3's flags are in memory seccomp cannot read: ENOSYS so libc uses clone.
        check(COMMAND, libc::SYS_clone3, a0(0), ENOSYS);
        check(RUN, libc::SYS_clone3, a0(0), ENOSYS);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn fork_and_vfork_are_refused_only_without_spawn() {
        for nr in [libc::SYS_fork, libc::SYS_vfork] {
            check(COMMAND, nr, a0(0), ALLOW);
            check(RUN, nr, a0(0), EPERM);
        }
    }

    #[test]
    fn sockets_without_network_are_unix_only() {
        let unix = bits(libc::AF_UNIX);
        let inet = bits(libc::AF_INET);
        check(COMMAND, libc::SYS_socket, a0(inet), EPERM);
        check(COMMAND, libc::SYS_socket, a0(bits(libc::AF_NETLINK)), EPERM);
        // Garbage in the upper half does not turn AF_INET into something else.
        check(COMMAND, libc::SYS_socket, a0(inet | 1 << 32), EPERM);
        check(COMMAND, libc::SYS_socketpair, a0(unix), ALLOW);
        check(COMMAND, libc::SYS_socketpair, a0(inet), EPERM);
        // Pathname unix sockets are not checked by Landlock below ABI 9.
        check(COMMAND, libc::SYS_socket, a0(unix), EPERM);
        let abi9 = FilterOptions {
            landlock_restricts_unix_connect: true,
            ..COMMAND
        };
        check(abi9, libc::SYS_socket, a0(unix), ALLOW);
        check(abi9, libc::SYS_socket, a0(inet), EPERM);
        let network = FilterOptions {
            network: Network::All,
            ..COMMAND
        };
        check(network, libc::SYS_socket, a0(inet), ALLOW);
        check(network, libc::SYS_socket, a0(unix), ALLOW);
    }

    #[test]
    fn terminal_injection_ioctls_are_refused() {
        for request in TERMINAL_INJECTION_IOCTLS {
            check(COMMAND, libc::SYS_ioctl, [0, request, 0, 0, 0, 0], EPERM);
            check(
                COMMAND,
                libc::SYS_ioctl,
                [0, request | 1 << 32, 0, 0, 0, 0],
                EPERM,
            );
        }
        check(
            COMMAND,
            libc::SYS_ioctl,
            [0, libc::TCGETS, 0, 0, 0, 0],
            ALLOW,
        );
    }

    #[test]
    fn fast_path_answers_exactly_like_the_full_program() {
        let arch = target_arch().unwrap();
        for options in [COMMAND, RUN] {
            let full = chain(vec![
                Part::FallThrough(
                    compile(eperm_rules(options).unwrap(), libc::EPERM, arch).unwrap(),
                ),
                Part::Final({
                    let mut enosys = BTreeMap::new();
                    enosys.insert(libc::SYS_clone3, Vec::new());
                    compile(enosys, libc::ENOSYS, arch).unwrap()
                }),
            ]);
            let fast = build(options).unwrap();
            let listed: Vec<i64> = eperm_rules(options).unwrap().keys().copied().collect();
            assert!(fast_path(arch, &listed).is_some(), "fast path missing");
            let probes = [
                0,
                bits(libc::AF_UNIX),
                bits(libc::AF_INET),
                libc::TIOCSTI,
                0x7fff_ffff,
            ];
            for nr in 0..600i64 {
                for arg in probes {
                    let mut data = [0u8; 64];
                    data[0..4].copy_from_slice(&(nr as u32).to_le_bytes());
                    data[4..8].copy_from_slice(&NATIVE.to_le_bytes());
                    data[16..24].copy_from_slice(&arg.to_le_bytes());
                    data[24..32].copy_from_slice(&arg.to_le_bytes());
                    assert_eq!(
                        run_program(&fast, &data),
                        run_program(&full, &data),
                        "syscall {nr} arg {arg:#x}"
                    );
                }
            }
            // Most calls take the short path: far fewer instructions than the full program.
            assert!(
                fast.len() < full.len() * 2,
                "{} vs {}",
                fast.len(),
                full.len()
            );
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_and_foreign_arch_calls_cannot_dodge_the_list() {
        let x32_link = libc::SYS_link | 0x4000_0000;
        check(COMMAND, x32_link, a0(0), ENOSYS);
        check(COMMAND, libc::SYS_read | 0x4000_0000, a0(0), ENOSYS);
        const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
        assert_eq!(verdict(COMMAND, AUDIT_ARCH_I386, 9, a0(0)), KILL);
    }
}
