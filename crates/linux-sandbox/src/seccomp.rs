//! The seccomp half: a deny-list of system calls that no sandboxed tool needs and that each lead
//! out of a Landlock sandbox or act on the whole machine, compiled with `seccompiler` in the
//! parent into classic BPF programs that the child installs with one raw syscall each.
//!
//! Why a deny-list and not an allow-list: the `command` tool runs arbitrary programs (`git`,
//! `python3`, compilers), whose syscall needs change with every libc; Landlock is the
//! deny-default layer for files, seccomp closes what Landlock does not see (DESIGN, platform
//! matrix).
//!
//! Three programs, because a seccompiler filter has a single match action:
//! 1. `EPERM` for the deny-list (with argument checks for `clone`, `socket`, `ioctl`);
//! 2. `ENOSYS` for `clone3`, whose flags live in memory that seccomp cannot read, so that libc
//!    falls back to `clone`, whose flags it can check;
//! 3. on x86_64, `ENOSYS` for x32 system calls (numbers with bit 30 set): they share
//!    `AUDIT_ARCH_X86_64` with native calls, so without this guard `link` through its x32 number
//!    would slip past a deny-list keyed on native numbers. 32-bit (`int 0x80`) calls carry another
//!    arch value and seccompiler's arch check kills the process.

use std::collections::BTreeMap;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

use crate::SandboxError;
use crate::policy::Network;

/// Inputs of the filter that vary between policies.
#[derive(Debug, Clone, Copy)]
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

/// The compiled programs, in installation order.
pub(crate) fn build(options: FilterOptions) -> Result<Vec<Vec<libc::sock_filter>>, SandboxError> {
    let arch = target_arch()?;
    let mut programs = Vec::with_capacity(3);
    #[cfg(target_arch = "x86_64")]
    programs.push(x32_guard());
    programs.push(compile(eperm_rules(options)?, libc::EPERM, arch)?);
    let mut enosys = BTreeMap::new();
    enosys.insert(libc::SYS_clone3, Vec::new());
    programs.push(compile(enosys, libc::ENOSYS, arch)?);
    Ok(programs)
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
