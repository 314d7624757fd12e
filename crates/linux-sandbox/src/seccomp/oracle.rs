//! The seccomp builder this crate used before the compact program (`build` in the parent
//! module), kept only in tests as the oracle: seccompiler's EPERM program for the deny-list and
//! the argument checks, its EOPNOTSUPP program for the xattr setters and its ENOSYS program for
//! `clone3` and `openat2`, chained behind two hand-written range guards (x32, and numbers newer
//! than the filter; seccompiler cannot express a range) and a binary-search fast path. The
//! equivalence tests run both programs on every syscall number and assert the same verdict.
//!
//! It shares the parent's lists (which calls, which argument) but none of its compilation: the
//! argument checks here are seccompiler rules, written as the rule reads ("refused when …").

// The old builder, as it was; tests may unwrap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

use super::{
    CLONE_NAMESPACE_FLAGS, FilterOptions, IMMUTABLE_FLAG_IOCTLS, NEWEST_KNOWN_SYSCALL,
    PRIORITY_CALLS, TERMINAL_INJECTION_IOCTLS, always_denied, bits, creating_opens, host_ipc,
    link_calls, mode_setters, pid_targets, unreadable_arguments, xattr_setters,
};
use crate::SandboxError;
use crate::policy::Network;

fn seccompiler_error(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::SeccompUnavailable {
        reason: e.to_string(),
    }
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    // Every argument checked here is an `int`/`unsigned int` in the kernel, which ignores the
    // upper half of the register: compare only the low 32 bits, so garbage in the upper half
    // cannot dodge an `Eq`.
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(seccompiler_error)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(seccompiler_error)
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
    )
    .map_err(seccompiler_error)?;
    let program: seccompiler::BpfProgram = filter.try_into().map_err(seccompiler_error)?;
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
    // The oracle knows only the refusing variant ([`FilterOptions::broker_links`] is tested
    // against the program without it).
    for nr in link_calls() {
        rules.insert(nr, Vec::new());
    }

    let mut clone_rules = CLONE_NAMESPACE_FLAGS
        .iter()
        .map(|&flag| flag_set(0, flag))
        .collect::<Result<Vec<_>, _>>()?;
    if !options.may_spawn {
        // A new process is a `clone` without CLONE_THREAD; threads keep working (RUN-7).
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
            .chain(&IMMUTABLE_FLAG_IOCTLS)
            .map(|&request| rule(vec![condition(1, SeccompCmpOp::Eq, request)?]))
            .collect::<Result<Vec<_>, _>>()?,
    );

    if !options.private_ipc {
        for nr in host_ipc() {
            rules.insert(nr, Vec::new());
        }
    }

    // Set-id bits: refused when either is set (one rule each, since rules are ORed).
    let setid = [libc::S_ISUID, libc::S_ISGID].map(u64::from);
    for (nr, mode) in mode_setters() {
        let mode = u8::try_from(mode).unwrap();
        let refused = setid
            .iter()
            .map(|&bit| rule(vec![condition(mode, SeccompCmpOp::MaskedEq(bit), bit)?]))
            .collect::<Result<Vec<_>, _>>()?;
        rules.insert(nr, refused);
    }
    // ... and for open, only when it creates (O_CREAT, or O_TMPFILE's own bit, `__O_TMPFILE`):
    // each set-id bit with each creating flag.
    let creating = [libc::O_CREAT, libc::O_TMPFILE & !libc::O_DIRECTORY].map(bits);
    for (nr, flags, mode) in creating_opens() {
        let [flags, mode] = [flags, mode].map(|index| u8::try_from(index).unwrap());
        let mut refused = Vec::new();
        for &bit in &setid {
            for &flag in &creating {
                refused.push(rule(vec![
                    condition(mode, SeccompCmpOp::MaskedEq(bit), bit)?,
                    condition(flags, SeccompCmpOp::MaskedEq(flag), flag)?,
                ])?);
            }
        }
        rules.insert(nr, refused);
    }

    // Other processes: the supervisor (PID 1) in a PID namespace of our own, else anyone but 0.
    let other_process = |arg: u8| {
        if options.own_pid_namespace {
            condition(arg, SeccompCmpOp::Eq, 1)
        } else {
            condition(arg, SeccompCmpOp::Ne, 0)
        }
    };
    for nr in pid_targets() {
        rules.insert(nr, vec![rule(vec![other_process(0)?])?]);
    }
    for (nr, user) in PRIORITY_CALLS {
        rules.insert(
            nr,
            vec![
                rule(vec![condition(0, SeccompCmpOp::Eq, u64::from(user))?])?,
                rule(vec![other_process(1)?])?,
            ],
        );
    }

    let unix = bits(libc::AF_UNIX);
    let not_unix = vec![rule(vec![condition(0, SeccompCmpOp::Ne, unix)?])?];
    // A datagram pair (type bit 1) is refused too where unix sockets are not contained.
    let mut pair = not_unix.clone();
    pair.push(rule(vec![condition(1, SeccompCmpOp::MaskedEq(2), 2)?])?);
    let loopback = options.network == Network::None && options.private_net;
    match (options.network, options.unix_connect_contained) {
        (Network::None, contained) if loopback => {
            rules.insert(
                libc::SYS_socketpair,
                if contained { not_unix } else { pair },
            );
            let mut others = vec![
                condition(0, SeccompCmpOp::Ne, bits(libc::AF_INET))?,
                condition(0, SeccompCmpOp::Ne, bits(libc::AF_INET6))?,
                condition(0, SeccompCmpOp::Ne, bits(libc::AF_NETLINK))?,
            ];
            if contained {
                others.push(condition(0, SeccompCmpOp::Ne, unix)?);
            }
            let netlink = vec![
                condition(0, SeccompCmpOp::Eq, bits(libc::AF_NETLINK))?,
                condition(2, SeccompCmpOp::Ne, 0)?,
                condition(2, SeccompCmpOp::Ne, 4)?,
            ];
            rules.insert(libc::SYS_socket, vec![rule(others)?, rule(netlink)?]);
        }
        (Network::None, true) => {
            rules.insert(libc::SYS_socketpair, not_unix.clone());
            rules.insert(libc::SYS_socket, not_unix);
        }
        (Network::None, false) => {
            rules.insert(libc::SYS_socketpair, pair);
            // Empty rule list: refused for every family (see `Network::None`).
            rules.insert(libc::SYS_socket, Vec::new());
        }
        (Network::All, false) => {
            rules.insert(libc::SYS_socketpair, pair);
            rules.insert(
                libc::SYS_socket,
                vec![rule(vec![condition(0, SeccompCmpOp::Eq, unix)?])?],
            );
        }
        (Network::All, true) => {}
    }
    Ok(rules)
}

/// The whole filter as one BPF program.
pub(crate) fn build(options: FilterOptions) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let arch = target_arch()?;
    let eperm = eperm_rules(options)?;
    let eopnotsupp: BTreeMap<i64, Vec<SeccompRule>> =
        xattr_setters().map(|nr| (nr, Vec::new())).into();
    let enosys: BTreeMap<i64, Vec<SeccompRule>> =
        unreadable_arguments().map(|nr| (nr, Vec::new())).into();
    let mut listed: Vec<i64> = eperm
        .keys()
        .chain(eopnotsupp.keys())
        .chain(enosys.keys())
        .copied()
        .collect();
    listed.sort_unstable();

    let mut parts = Vec::with_capacity(6);
    // The range guards come first: the fast path below allows every unlisted number.
    #[cfg(target_arch = "x86_64")]
    parts.push(Part::FallThrough(enosys_from(arch, X32_SYSCALL_BIT)));
    parts.push(Part::FallThrough(enosys_from(
        arch,
        NEWEST_KNOWN_SYSCALL + 1,
    )));
    parts.extend(fast_path(arch, &listed).map(Part::Final));
    parts.push(Part::FallThrough(compile(eperm, libc::EPERM, arch)?));
    parts.push(Part::FallThrough(compile(
        eopnotsupp,
        libc::EOPNOTSUPP,
        arch,
    )?));
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
fn audit_arch(arch: TargetArch) -> u32 {
    match arch {
        TargetArch::x86_64 => 62 | 0x8000_0000 | 0x4000_0000,
        TargetArch::aarch64 => 183 | 0x8000_0000 | 0x4000_0000,
        TargetArch::riscv64 => 243 | 0x8000_0000 | 0x4000_0000,
    }
}

fn fast_path(arch: TargetArch, listed: &[i64]) -> Option<Vec<libc::sock_filter>> {
    let numbers: Vec<u32> = listed
        .iter()
        .map(|&nr| u32::try_from(nr).ok())
        .collect::<Option<_>>()?;
    let tree = search(&numbers)?;
    let mut out = vec![
        insn(LD_ABS, 0, 0, 4), // seccomp_data.arch
        insn(JEQ, 1, 0, audit_arch(arch)),
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

/// x32 system calls are native numbers with this bit set (`__X32_SYSCALL_BIT`).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `ENOSYS` for native numbers from `first` on. Hand-written because seccompiler matches
/// syscall numbers exactly and cannot express a range.
fn enosys_from(arch: TargetArch, first: u32) -> Vec<libc::sock_filter> {
    const ARCH_OFFSET: u32 = 4; // offsetof(struct seccomp_data, arch)
    const NR_OFFSET: u32 = 0; // offsetof(struct seccomp_data, nr)
    vec![
        insn(LD_ABS, 0, 0, ARCH_OFFSET),
        // Another arch: not ours to judge here (the EPERM program kills it).
        insn(JEQ, 0, 3, audit_arch(arch)),
        insn(LD_ABS, 0, 0, NR_OFFSET),
        insn(JGE, 0, 1, first),
        insn(RET, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        insn(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}
