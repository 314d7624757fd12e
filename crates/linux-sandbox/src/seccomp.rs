//! The seccomp half: a deny-list of system calls that no sandboxed tool needs and that each lead
//! out of a Landlock sandbox or act on the whole machine, compiled in the parent into one small
//! classic BPF program that the child installs with one raw syscall.
//!
//! Why a deny-list and not an allow-list: the `command` tool runs arbitrary programs (`git`,
//! `python3`, compilers), whose syscall needs change with every libc; Landlock is the
//! deny-default layer for files, seccomp closes what Landlock does not see (DESIGN, platform
//! matrix).
//!
//! The program, in order:
//! 1. another architecture (32-bit `int 0x80` calls on x86_64 carry `AUDIT_ARCH_I386`): kill
//!    the process, because the deny-list is keyed on native numbers;
//! 2. on x86_64, `ENOSYS` for x32 system calls (numbers with bit 30 set): they share
//!    `AUDIT_ARCH_X86_64` with native calls, so without this guard `link` through its x32
//!    number would slip past the list;
//! 3. a binary search over the listed numbers: an unlisted call is allowed after about seven
//!    comparisons, an unconditional denial returns `EPERM` from its leaf, `clone3` returns
//!    `ENOSYS` (its flags live in memory seccomp cannot read, so libc falls back to `clone`),
//!    and only `clone`, `ioctl`, `socket` and `socketpair` jump to a few instructions that
//!    check one argument.
//!
//! Why hand-written and short: the kernel checks, converts, JITs and (since Linux 5.11)
//! evaluates the program for every syscall number when the child attaches it, so attaching
//! costs in proportion to the program's length and its paths. seccompiler's output for the
//! same decisions (kept in the tests as the oracle, `oracle.rs`) was ~460 instructions and took
//! ~220 µs to attach; this one is ~90 and takes ~90 µs, against ~26 µs for a one-instruction
//! filter (Linux 6.18, `cargo run --release -p linux-sandbox --example seccomp_attach`).

use std::sync::Mutex;

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

/// A C `int` flag or constant (all non-negative here) as a seccomp comparison value.
#[cfg(test)]
fn bits(value: i32) -> u64 {
    u64::from(value as u32)
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

/// The `AUDIT_ARCH_*` value of native system calls (`<linux/audit.h>`): the ELF machine,
/// `__AUDIT_ARCH_64BIT` and `__AUDIT_ARCH_LE`.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH_NATIVE: Option<u32> = Some(62 | 0x8000_0000 | 0x4000_0000);
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_NATIVE: Option<u32> = Some(183 | 0x8000_0000 | 0x4000_0000);
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH_NATIVE: Option<u32> = Some(243 | 0x8000_0000 | 0x4000_0000);
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
const AUDIT_ARCH_NATIVE: Option<u32> = None;

/// Offsets in `struct seccomp_data` (`<linux/seccomp.h>`): `nr`, `arch`, then
/// `instruction_pointer` and six 64-bit `args`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

/// Offset of the low 32 bits of argument `index`. Every argument checked here is an `int` or
/// `unsigned int` in the kernel, which ignores the upper half of the register: compare only the
/// low half, so garbage in the upper half cannot dodge a comparison.
const fn arg_low(index: u32) -> u32 {
    let low_half_at = if cfg!(target_endian = "big") { 4 } else { 0 };
    16 + 8 * index + low_half_at
}

const LD_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// A jump target in [`Asm`]: an index into its label table.
type Label = usize;
/// "The next instruction" as a jump target.
const NEXT: Label = usize::MAX;

/// A tiny forward-only assembler: conditional jumps name labels, bound later; `finish` turns
/// them into BPF's 8-bit relative offsets, or fails if one does not fit.
#[derive(Default)]
struct Asm {
    code: Vec<libc::sock_filter>,
    /// (instruction index, jump-if-true label, jump-if-false label).
    jumps: Vec<(usize, Label, Label)>,
    labels: Vec<Option<usize>>,
}

impl Asm {
    fn label(&mut self) -> Label {
        self.labels.push(None);
        self.labels.len() - 1
    }

    fn bind(&mut self, label: Label) {
        self.labels[label] = Some(self.code.len());
    }

    fn stmt(&mut self, code: u16, k: u32) {
        self.code.push(libc::sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        });
    }

    fn jump(&mut self, code: u16, k: u32, jt: Label, jf: Label) {
        self.jumps.push((self.code.len(), jt, jf));
        self.stmt(code, k);
    }

    /// A `RET` at a new label.
    fn ret(&mut self, label: Label, verdict: u32) {
        self.bind(label);
        self.stmt(RET, verdict);
    }

    fn finish(mut self) -> Result<Vec<libc::sock_filter>, SandboxError> {
        let labels = self.labels;
        let offset = |at: usize, label: Label| -> Option<u8> {
            if label == NEXT {
                return Some(0);
            }
            let target = (*labels.get(label)?)?;
            u8::try_from(target.checked_sub(at + 1)?).ok()
        };
        for (at, jt, jf) in self.jumps {
            match (offset(at, jt), offset(at, jf)) {
                (Some(jt), Some(jf)) => {
                    self.code[at].jt = jt;
                    self.code[at].jf = jf;
                }
                _ => {
                    return Err(SandboxError::SeccompUnavailable {
                        reason: format!("seccomp program jump at {at} does not fit"),
                    });
                }
            }
        }
        Ok(self.code)
    }
}

/// Emits a binary search over `sorted` (syscall number in A): a listed number jumps to its
/// label, any other number to `allow`.
fn search(asm: &mut Asm, sorted: &[(u32, Label)], allow: Label) {
    if sorted.len() <= 4 {
        for (i, &(nr, target)) in sorted.iter().enumerate() {
            let otherwise = if i + 1 == sorted.len() { allow } else { NEXT };
            asm.jump(JEQ, nr, target, otherwise);
        }
        return;
    }
    let (low, high) = sorted.split_at(sorted.len() / 2);
    let right = asm.label();
    asm.jump(JGE, high[0].0, right, NEXT);
    search(asm, low, allow);
    asm.bind(right);
    search(asm, high, allow);
}

/// The whole filter as one BPF program.
pub(crate) fn build(options: FilterOptions) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let native = AUDIT_ARCH_NATIVE.ok_or_else(|| SandboxError::SeccompUnavailable {
        reason: format!(
            "no seccomp filter for architecture {}",
            std::env::consts::ARCH
        ),
    })?;
    let mut asm = Asm::default();
    let [allow, eperm, enosys, kill] = [(); 4].map(|()| asm.label());
    let [clone, ioctl, not_unix] = [(); 3].map(|()| asm.label());

    let mut listed: Vec<(i64, Label)> = always_denied().into_iter().map(|nr| (nr, eperm)).collect();
    listed.push((libc::SYS_clone3, enosys));
    listed.push((libc::SYS_clone, clone));
    listed.push((libc::SYS_ioctl, ioctl));
    #[cfg(target_arch = "x86_64")]
    if !options.may_spawn {
        listed.push((libc::SYS_fork, eperm));
        listed.push((libc::SYS_vfork, eperm));
    }
    if options.network == Network::None {
        listed.push((libc::SYS_socketpair, not_unix));
        let socket = if options.landlock_restricts_unix_connect {
            not_unix
        } else {
            // Refused for every family (see `Network::None`).
            eperm
        };
        listed.push((libc::SYS_socket, socket));
    }
    let mut sorted = listed
        .into_iter()
        .map(|(nr, label)| Ok((u32::try_from(nr).map_err(|_| bad_number(nr))?, label)))
        .collect::<Result<Vec<_>, SandboxError>>()?;
    sorted.sort_unstable_by_key(|&(nr, _)| nr);

    asm.stmt(LD_ABS, ARCH_OFFSET);
    asm.jump(JEQ, native, NEXT, kill);
    asm.stmt(LD_ABS, NR_OFFSET);
    #[cfg(target_arch = "x86_64")]
    asm.jump(JGE, X32_SYSCALL_BIT, enosys, NEXT);
    search(&mut asm, &sorted, allow);

    // clone: a namespace flag (each is one bit, so "any set" is one JSET) is refused; without
    // spawning, so is a clone without CLONE_THREAD (a new process; SPEC RUN-7).
    asm.bind(clone);
    asm.stmt(LD_ABS, arg_low(0));
    let namespaces = CLONE_NAMESPACE_FLAGS
        .iter()
        .fold(0u32, |mask, &f| mask | f as u32);
    if options.may_spawn {
        asm.jump(JSET, namespaces, eperm, allow);
    } else {
        asm.jump(JSET, namespaces, eperm, NEXT);
        asm.jump(JSET, libc::CLONE_THREAD as u32, allow, eperm);
    }
    asm.bind(ioctl);
    asm.stmt(LD_ABS, arg_low(1));
    let [first, last] = TERMINAL_INJECTION_IOCTLS.map(|request| request as u32);
    asm.jump(JEQ, first, eperm, NEXT);
    asm.jump(JEQ, last, eperm, allow);
    if options.network == Network::None {
        asm.bind(not_unix);
        asm.stmt(LD_ABS, arg_low(0));
        asm.jump(JEQ, libc::AF_UNIX as u32, allow, eperm);
    }
    asm.ret(allow, RET_ALLOW);
    asm.ret(eperm, RET_EPERM);
    asm.ret(enosys, RET_ENOSYS);
    asm.ret(kill, RET_KILL);
    asm.finish()
}

fn bad_number(nr: i64) -> SandboxError {
    SandboxError::SeccompUnavailable {
        reason: format!("syscall number {nr} does not fit the seccomp program"),
    }
}

/// x32 system calls are native numbers with this bit set (`__X32_SYSCALL_BIT`).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

#[cfg(test)]
mod oracle;

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

    /// The flags glibc's `pthread_create` passes to `clone`.
    fn thread_flags() -> u64 {
        bits(
            libc::CLONE_VM
                | libc::CLONE_FS
                | libc::CLONE_FILES
                | libc::CLONE_SIGHAND
                | libc::CLONE_THREAD
                | libc::CLONE_SYSVSEM,
        )
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
        let thread = thread_flags();
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

    /// Every option set the filter can be built for.
    fn all_options() -> Vec<FilterOptions> {
        let mut all = Vec::new();
        for network in [Network::None, Network::All] {
            for may_spawn in [false, true] {
                for landlock_restricts_unix_connect in [false, true] {
                    all.push(FilterOptions {
                        network,
                        may_spawn,
                        landlock_restricts_unix_connect,
                    });
                }
            }
        }
        all
    }

    /// Argument values that matter to some rule, each also with garbage in the upper half.
    fn interesting_args() -> Vec<u64> {
        let thread = thread_flags();
        let mut low: Vec<u64> = vec![
            0,
            u64::from(u32::MAX),
            bits(libc::SIGCHLD),
            bits(libc::CLONE_THREAD),
            thread,
            bits(libc::CLONE_VFORK | libc::CLONE_VM | libc::SIGCHLD),
            bits(libc::AF_UNIX),
            bits(libc::AF_INET),
            bits(libc::AF_INET6),
            bits(libc::AF_NETLINK),
            bits(libc::AF_PACKET),
            libc::TIOCSTI,
            libc::TIOCLINUX,
            libc::TCGETS,
            libc::TIOCSCTTY,
            libc::FIONREAD,
        ];
        for flag in CLONE_NAMESPACE_FLAGS {
            low.push(bits(flag));
            low.push(bits(flag) | bits(libc::SIGCHLD));
            low.push(bits(flag) | thread);
        }
        let mut all = Vec::new();
        for value in low {
            all.extend([value, value | 0xdead_beef << 32, value | 1 << 32]);
        }
        all.push(u64::MAX);
        all
    }

    fn data(arch: u32, nr: u32, args: [u64; 6]) -> [u8; 64] {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, arg) in args.iter().enumerate() {
            data[16 + i * 8..24 + i * 8].copy_from_slice(&arg.to_le_bytes());
        }
        data
    }

    #[cfg(target_arch = "x86_64")]
    const FOREIGN_ARCHES: [u32; 3] = [3 | 0x4000_0000, 183 | 0x8000_0000 | 0x4000_0000, 0];
    #[cfg(not(target_arch = "x86_64"))]
    const FOREIGN_ARCHES: [u32; 3] = [3 | 0x4000_0000, 62 | 0x8000_0000 | 0x4000_0000, 0];

    /// The syscall numbers compared: every native number below 1024, their x32 aliases, and
    /// the edges of the number space.
    fn numbers() -> Vec<u32> {
        let mut numbers: Vec<u32> = (0..=1023).collect();
        numbers.extend((0..=1023).map(|nr| nr | 0x4000_0000));
        numbers.extend([0x3fff_ffff, 0x7fff_ffff, 0x8000_0000, u32::MAX]);
        numbers
    }

    #[test]
    fn compact_program_decides_exactly_like_the_seccompiler_program() {
        let args = interesting_args();
        for options in all_options() {
            let old = oracle::build(options).unwrap();
            let new = build(options).unwrap();
            let mut arches = vec![NATIVE];
            arches.extend(FOREIGN_ARCHES);
            for arch in arches {
                for nr in numbers() {
                    for &value in &args {
                        let data = data(arch, nr, [value; 6]);
                        assert_eq!(
                            run_program(&new, &data),
                            run_program(&old, &data),
                            "{options:?} arch {arch:#x} syscall {nr} args all {value:#x}"
                        );
                    }
                }
            }
            // The checked calls, with the checked argument and the others differing.
            let mut checked = vec![
                libc::SYS_clone,
                libc::SYS_ioctl,
                libc::SYS_socket,
                libc::SYS_socketpair,
            ];
            #[cfg(target_arch = "x86_64")]
            checked.extend([libc::SYS_fork, libc::SYS_vfork]);
            for nr in checked {
                for &first in &args {
                    for &second in &args {
                        let data = data(NATIVE, nr as u32, [first, second, 0, first, 0, 0]);
                        assert_eq!(
                            run_program(&new, &data),
                            run_program(&old, &data),
                            "{options:?} syscall {nr} args {first:#x}, {second:#x}"
                        );
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn compact_and_seccompiler_programs_agree_on_random_calls(
            option in 0usize..8,
            arch in 0usize..4,
            nr in proptest::prelude::any::<u32>(),
            small_nr in 0u32..1024,
            use_small in proptest::prelude::any::<bool>(),
            args in proptest::prelude::any::<[u64; 6]>(),
        ) {
            let options = all_options()[option];
            let arch = if arch == 0 { NATIVE } else { FOREIGN_ARCHES[arch - 1] };
            let nr = if use_small { small_nr } else { nr };
            let data = data(arch, nr, args);
            let old = oracle::build(options).unwrap();
            let new = build(options).unwrap();
            proptest::prop_assert_eq!(run_program(&new, &data), run_program(&old, &data));
        }
    }

    #[test]
    fn program_is_short_and_an_unlisted_call_walks_few_instructions() {
        for options in all_options() {
            let program = build(options).unwrap();
            // The seccompiler program was ~460 instructions.
            assert!(program.len() < 120, "{options:?}: {}", program.len());
            let longest = (0..1024u32)
                .map(|nr| run_counting(&program, &data(NATIVE, nr, [0; 6])).1)
                .max()
                .unwrap();
            assert!(longest <= 16, "{options:?}: {longest} steps");
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
