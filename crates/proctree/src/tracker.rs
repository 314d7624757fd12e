//! Which processes belong to a command: the decision logic, free of any system call, so that it
//! can be tested on tables made by hand and on random ones (CMD-6, CMD-7).
//!
//! Rules, each from CMD-7:
//! - A process is a descendant when its parent, *as the snapshot shows it*, is the root or an
//!   already tracked identity, and it did not start before that parent. The start-time check
//!   refuses a parent link that a recycled PID would otherwise fake: a child cannot be older
//!   than its parent.
//! - A process group is expanded only while a tracked member whose identity still matches
//!   anchors it: the anchor must be in the snapshot (before) and must still be the same process
//!   when checked again (after). Candidates found that way are pinned by identity.
//! - Once no tracked member of a group remains, that group id is retired and never expanded
//!   again, even if the number comes back: a group id is a PID, and PIDs are recycled.
//! - Only tracked identities are ever offered for signalling; the root never is.

use std::collections::{BTreeMap, BTreeSet};

use crate::identity::ProcessId;
use crate::table::{ProcessEntry, ProcessTable};

/// The set of processes observed to belong to one command, with the rules above.
///
/// ```
/// use proctree::{ProcessEntry, ProcessId, ProcessState, ProcessTable, Tracker};
///
/// let root = ProcessId::new(10, 100);
/// let row = |pid, start, ppid, pgid| ProcessEntry {
///     id: ProcessId::new(pid, start),
///     ppid,
///     pgid,
///     state: ProcessState::Alive,
/// };
/// let mut tracker = Tracker::new(root);
/// let table = ProcessTable::from_entries([
///     row(10, 100, 1, 10),
///     row(11, 101, 10, 11), // the command
///     row(12, 102, 11, 11), // its child
///     row(13, 103, 1, 11),  // an orphan still in the command's group
///     row(14, 90, 1, 14),   // someone else
/// ]);
/// let new = tracker.observe(&table, &mut |id| table.contains(id));
/// assert_eq!(new.len(), 3);
/// assert!(!tracker.is_tracked(ProcessId::new(14, 90)));
/// ```
#[derive(Clone, Debug)]
pub struct Tracker {
    root: ProcessId,
    /// Every identity ever observed as a descendant, with the group it was last seen in.
    known: BTreeMap<ProcessId, u32>,
    /// Group ids seen on tracked members that have not been retired yet.
    live_groups: BTreeSet<u32>,
    retired_groups: BTreeSet<u32>,
}

impl Tracker {
    /// A tracker for the descendants of `root` (the supervisor, or the command itself where no
    /// supervisor exists). The root is never offered for signalling.
    #[must_use]
    pub fn new(root: ProcessId) -> Self {
        Self {
            root,
            known: BTreeMap::new(),
            live_groups: BTreeSet::new(),
            retired_groups: BTreeSet::new(),
        }
    }

    /// The root this tracker was made for.
    #[must_use]
    pub fn root(&self) -> ProcessId {
        self.root
    }

    /// Records what `table` shows and returns the identities tracked for the first time.
    ///
    /// `still_same` answers, from the live system, whether a process is still the one named by
    /// the identity; it is the "after" check of a group expansion (CMD-7).
    pub fn observe(
        &mut self,
        table: &ProcessTable,
        still_same: &mut dyn FnMut(ProcessId) -> bool,
    ) -> Vec<ProcessId> {
        let mut new = Vec::new();
        loop {
            let mut changed = self.follow_parent_links(table, &mut new);
            if changed {
                continue;
            }
            self.note_groups(table);
            changed |= self.expand_groups(table, still_same, &mut new);
            if !changed {
                return new;
            }
        }
    }

    /// Records `child` from one parent link read on the live system — the caller listed it
    /// under `parent` and checked, while `parent` provably still held its PID, that the
    /// child's own row names it (`child.ppid == parent.pid()`) — and returns whether `child` is
    /// tracked. The rule is [`observe`](Self::observe)'s: the parent must be the root or
    /// tracked, and the child cannot be older than its parent. Walking from a subreaper root
    /// this way reaches every descendant (the walk's completeness argument is in the Linux
    /// backend), so no group expansion is needed on this path.
    pub fn adopt(&mut self, parent: ProcessId, child: &ProcessEntry) -> bool {
        if child.id == self.root {
            return false;
        }
        if self.known.contains_key(&child.id) {
            return true;
        }
        let parent_is_ours = parent == self.root || self.known.contains_key(&parent);
        if !parent_is_ours
            || child.ppid != parent.pid()
            || child.id.start_time() < parent.start_time()
        {
            return false;
        }
        self.known.insert(child.id, child.pgid);
        if !self.retired_groups.contains(&child.pgid) {
            self.live_groups.insert(child.pgid);
        }
        true
    }

    fn follow_parent_links(&mut self, table: &ProcessTable, new: &mut Vec<ProcessId>) -> bool {
        let mut changed = false;
        for e in table.entries() {
            if e.id == self.root || self.known.contains_key(&e.id) {
                continue;
            }
            let Some(parent) = table.get(e.ppid) else {
                continue;
            };
            let parent_is_ours = parent.id == self.root || self.known.contains_key(&parent.id);
            if parent_is_ours && e.id.start_time() >= parent.id.start_time() {
                self.known.insert(e.id, e.pgid);
                new.push(e.id);
                changed = true;
            }
        }
        changed
    }

    /// Updates each tracked member's group from the table and retires every group that no
    /// tracked member present in the table belongs to any more.
    fn note_groups(&mut self, table: &ProcessTable) {
        let mut anchored = BTreeSet::new();
        for (id, pgid) in &mut self.known {
            if let Some(e) = table.get(id.pid()).filter(|e| e.id == *id) {
                *pgid = e.pgid;
                anchored.insert(e.pgid);
            }
        }
        for g in &anchored {
            if !self.retired_groups.contains(g) {
                self.live_groups.insert(*g);
            }
        }
        let gone: Vec<u32> = self.live_groups.difference(&anchored).copied().collect();
        for g in gone {
            self.live_groups.remove(&g);
            self.retired_groups.insert(g);
        }
    }

    fn expand_groups(
        &mut self,
        table: &ProcessTable,
        still_same: &mut dyn FnMut(ProcessId) -> bool,
        new: &mut Vec<ProcessId>,
    ) -> bool {
        let mut changed = false;
        let groups: Vec<u32> = self.live_groups.iter().copied().collect();
        for g in groups {
            let candidates: Vec<ProcessId> = table
                .entries()
                .iter()
                .filter(|e| e.pgid == g && e.id != self.root && !self.known.contains_key(&e.id))
                .map(|e| e.id)
                .collect();
            if candidates.is_empty() {
                continue;
            }
            // Before: anchors are tracked members the snapshot shows in group g.
            let anchors: Vec<ProcessId> = self
                .known
                .iter()
                .filter(|(id, pgid)| **pgid == g && table.contains(**id))
                .map(|(id, _)| *id)
                .collect();
            // After: one anchor must still be the same process now, or the group may have
            // emptied and its number been reused while we looked.
            if anchors.into_iter().any(&mut *still_same) {
                for c in candidates {
                    self.known.insert(c, g);
                    new.push(c);
                    changed = true;
                }
            }
        }
        changed
    }

    /// Whether `id` was observed as a descendant (so it may be signalled once re-verified).
    #[must_use]
    pub fn is_tracked(&self, id: ProcessId) -> bool {
        self.known.contains_key(&id)
    }

    /// Every identity observed as a descendant, in PID order.
    pub fn tracked(&self) -> impl Iterator<Item = ProcessId> + '_ {
        self.known.keys().copied()
    }

    /// Whether group id `pgid` lost its last tracked member and will never be expanded again.
    #[must_use]
    pub fn is_retired_group(&self, pgid: u32) -> bool {
        self.retired_groups.contains(&pgid)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use crate::identity::ProcessState;

    fn row(pid: u32, start: u64, ppid: u32, pgid: u32) -> ProcessEntry {
        ProcessEntry {
            id: ProcessId::new(pid, start),
            ppid,
            pgid,
            state: ProcessState::Alive,
        }
    }

    const ROOT: ProcessId = ProcessId::new(10, 100);

    #[test]
    fn a_recycled_parent_pid_does_not_adopt_an_older_process() {
        let mut t = Tracker::new(ROOT);
        let first = ProcessTable::from_entries([row(10, 100, 1, 10), row(11, 101, 10, 11)]);
        t.observe(&first, &mut |id| first.contains(id));
        // 11 died; its PID now belongs to a newer process of ours, and an unrelated process
        // that started before it still names 11 as its parent (a stale read).
        let second = ProcessTable::from_entries([
            row(10, 100, 1, 10),
            row(11, 150, 10, 11),
            row(12, 120, 11, 12),
        ]);
        t.observe(&second, &mut |id| second.contains(id));
        assert!(t.is_tracked(ProcessId::new(11, 150)));
        assert!(!t.is_tracked(ProcessId::new(12, 120)));
    }

    #[test]
    fn group_is_not_expanded_when_the_anchor_changed_after_the_snapshot() {
        let mut t = Tracker::new(ROOT);
        let table = ProcessTable::from_entries([
            row(10, 100, 1, 10),
            row(11, 101, 10, 11),
            row(13, 103, 1, 11),
        ]);
        let new = t.observe(&table, &mut |_| false);
        assert_eq!(new, vec![ProcessId::new(11, 101)]);
    }

    #[test]
    fn a_retired_group_id_is_never_chased_again() {
        let mut t = Tracker::new(ROOT);
        let first = ProcessTable::from_entries([row(10, 100, 1, 10), row(11, 101, 10, 11)]);
        t.observe(&first, &mut |id| first.contains(id));
        let gone = ProcessTable::from_entries([row(10, 100, 1, 10)]);
        t.observe(&gone, &mut |id| gone.contains(id));
        assert!(t.is_retired_group(11));
        // A new child of ours later lands in a group numbered 11 again, next to a stranger.
        let back = ProcessTable::from_entries([
            row(10, 100, 1, 10),
            row(12, 200, 10, 11),
            row(11, 199, 1, 11),
        ]);
        t.observe(&back, &mut |id| back.contains(id));
        assert!(t.is_tracked(ProcessId::new(12, 200)));
        assert!(!t.is_tracked(ProcessId::new(11, 199)));
    }

    #[test]
    fn the_root_is_never_tracked_even_in_an_anchored_group() {
        let mut t = Tracker::new(ROOT);
        let table = ProcessTable::from_entries([row(10, 100, 1, 10), row(11, 101, 10, 10)]);
        t.observe(&table, &mut |id| table.contains(id));
        assert!(!t.is_tracked(ROOT));
        assert_eq!(
            t.tracked().collect::<Vec<_>>(),
            vec![ProcessId::new(11, 101)]
        );
    }

    #[test]
    fn adopt_accepts_only_a_verified_link_from_a_tracked_parent() {
        let mut t = Tracker::new(ROOT);
        // Listed under the root, but its own row names another parent: refused.
        assert!(!t.adopt(ROOT, &row(11, 101, 12, 11)));
        // Under an untracked parent: refused.
        assert!(!t.adopt(ProcessId::new(12, 102), &row(13, 103, 12, 13)));
        // Older than its parent (a recycled PID's stale link): refused.
        assert!(!t.adopt(ROOT, &row(14, 99, 10, 14)));
        // The root itself is never tracked.
        assert!(!t.adopt(ROOT, &row(10, 100, 10, 10)));
        assert!(t.adopt(ROOT, &row(11, 101, 10, 11)));
        assert!(t.adopt(ProcessId::new(11, 101), &row(15, 105, 11, 11)));
        assert_eq!(
            t.tracked().collect::<Vec<_>>(),
            vec![ProcessId::new(11, 101), ProcessId::new(15, 105)]
        );
    }

    // ---- A model of the kernel's process table, for the property test -------------------

    const INIT: u32 = 1;
    const MAX_PID: u32 = 40;

    #[derive(Clone, Debug)]
    struct Proc {
        start: u64,
        ppid: u32,
        pgid: u32,
        sid: u32,
        zombie: bool,
    }

    struct World {
        procs: BTreeMap<u32, Proc>,
        clock: u64,
        subreaper: bool,
        /// Ground truth for every identity that ever existed: started by the root's lineage?
        descendant: HashMap<ProcessId, bool>,
        root: ProcessId,
    }

    #[derive(Clone, Debug)]
    enum Op {
        Fork(usize),
        Exit(usize),
        Reap(usize),
        Setsid(usize),
        Setpgid(usize, usize),
        Observe,
        /// What the Linux backend does: walk the children lists down from the root and adopt
        /// each parent link.
        Walk,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<usize>().prop_map(Op::Fork),
            3 => any::<usize>().prop_map(Op::Exit),
            2 => any::<usize>().prop_map(Op::Reap),
            1 => any::<usize>().prop_map(Op::Setsid),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Setpgid(a, b)),
            2 => Just(Op::Observe),
            2 => Just(Op::Walk),
        ]
    }

    impl World {
        fn new(subreaper: bool) -> Self {
            let mut w = World {
                procs: BTreeMap::new(),
                clock: 1,
                subreaper,
                descendant: HashMap::new(),
                root: ProcessId::new(2, 2),
            };
            let mk = |start, ppid, pgid, sid| Proc {
                start,
                ppid,
                pgid,
                sid,
                zombie: false,
            };
            w.procs.insert(INIT, mk(1, 0, 1, 1));
            w.procs.insert(2, mk(2, INIT, 2, 2)); // the supervisor: its own session
            w.procs.insert(3, mk(3, INIT, 1, 1)); // strangers
            w.procs.insert(4, mk(4, INIT, 4, 4));
            w.clock = 5;
            for (pid, p) in &w.procs {
                w.descendant.insert(ProcessId::new(*pid, p.start), false);
            }
            w
        }

        fn id(&self, pid: u32) -> ProcessId {
            ProcessId::new(pid, self.procs[&pid].start)
        }

        fn live(&self, pick: usize, include_fixed: bool) -> Option<u32> {
            let v: Vec<u32> = self
                .procs
                .iter()
                .filter(|(pid, p)| !p.zombie && (include_fixed || (**pid != INIT && **pid != 2)))
                .map(|(pid, _)| *pid)
                .collect();
            (!v.is_empty()).then(|| v[pick % v.len()])
        }

        fn free_pid(&self) -> Option<u32> {
            // The kernel never hands out a PID still used as a PID, group id or session id.
            (1..=MAX_PID).find(|n| {
                !self.procs.contains_key(n)
                    && !self.procs.values().any(|p| p.pgid == *n || p.sid == *n)
            })
        }

        fn apply(&mut self, op: &Op, tracker: &mut Tracker) {
            match *op {
                Op::Fork(a) => {
                    let (Some(parent), Some(pid)) = (self.live(a, true), self.free_pid()) else {
                        return;
                    };
                    let p = self.procs[&parent].clone();
                    self.clock += 1;
                    let child = Proc {
                        start: self.clock,
                        ppid: parent,
                        pgid: p.pgid,
                        sid: p.sid,
                        zombie: false,
                    };
                    let is_desc = parent == self.root.pid() || self.descendant[&self.id(parent)];
                    self.procs.insert(pid, child);
                    self.descendant.insert(self.id(pid), is_desc);
                }
                Op::Exit(a) => {
                    let Some(victim) = self.live(a, false) else {
                        return;
                    };
                    let victim_desc = self.descendant[&self.id(victim)];
                    let reaper = if victim_desc && self.subreaper {
                        self.root.pid()
                    } else {
                        INIT
                    };
                    for p in self.procs.values_mut() {
                        if p.ppid == victim {
                            p.ppid = reaper;
                        }
                    }
                    let parent = self.procs[&victim].ppid;
                    if parent == INIT {
                        self.procs.remove(&victim);
                    } else if let Some(p) = self.procs.get_mut(&victim) {
                        p.zombie = true;
                    }
                }
                Op::Reap(a) => {
                    let z: Vec<u32> = self
                        .procs
                        .iter()
                        .filter(|(_, p)| p.zombie)
                        .map(|(k, _)| *k)
                        .collect();
                    if !z.is_empty() {
                        self.procs.remove(&z[a % z.len()]);
                    }
                }
                Op::Setsid(a) => {
                    let Some(x) = self.live(a, false) else { return };
                    if !self.procs.values().any(|p| p.pgid == x) {
                        let p = self.procs.get_mut(&x).unwrap();
                        p.sid = x;
                        p.pgid = x;
                    }
                }
                Op::Setpgid(a, b) => {
                    let (Some(x), Some(y)) = (self.live(a, false), self.live(b, true)) else {
                        return;
                    };
                    let (px, py) = (self.procs[&x].clone(), self.procs[&y].clone());
                    if px.sid != x && px.sid == py.sid {
                        // Join y's group, or (x == y) start one's own.
                        let target = if x == y { x } else { py.pgid };
                        self.procs.get_mut(&x).unwrap().pgid = target;
                    }
                }
                Op::Observe => {
                    let table = self.snapshot();
                    tracker.observe(&table, &mut |id| table.contains(id));
                    self.check(tracker, &table);
                }
                Op::Walk => {
                    let table = self.snapshot();
                    let mut stack = vec![self.root];
                    while let Some(parent) = stack.pop() {
                        for e in table.entries().iter().filter(|e| e.ppid == parent.pid()) {
                            if tracker.adopt(parent, e) {
                                stack.push(e.id);
                            }
                        }
                    }
                    self.check(tracker, &table);
                }
            }
        }

        fn snapshot(&self) -> ProcessTable {
            ProcessTable::from_entries(self.procs.iter().map(|(pid, p)| ProcessEntry {
                id: ProcessId::new(*pid, p.start),
                ppid: p.ppid,
                pgid: p.pgid,
                state: if p.zombie {
                    ProcessState::Dead
                } else {
                    ProcessState::Alive
                },
            }))
        }

        fn check(&self, tracker: &Tracker, table: &ProcessTable) {
            for id in tracker.tracked() {
                assert!(
                    self.descendant[&id],
                    "tracker pinned {id}, which the command never started"
                );
                assert_ne!(
                    id, self.root,
                    "the root must never be offered for signalling"
                );
            }
            if self.subreaper {
                for e in table.entries() {
                    if self.descendant[&e.id] {
                        assert!(tracker.is_tracked(e.id), "descendant {} was missed", e.id);
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// CMD-7 and invariant 3: whatever the process table does, with or without a
        /// subreaper, nothing that the command did not start is ever tracked (so never
        /// signalled), and with a subreaper every live descendant is found — by a full scan
        /// with group expansion and by a walk down the children lists alike, in any mix.
        #[test]
        fn tracker_never_offers_an_identity_it_did_not_observe_as_a_descendant(
            subreaper in any::<bool>(),
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            let mut world = World::new(subreaper);
            let mut tracker = Tracker::new(world.root);
            for op in &ops {
                world.apply(op, &mut tracker);
            }
            world.apply(&Op::Observe, &mut tracker);
            // The signal step: only tracked identities that still match the live table.
            let now = world.snapshot();
            for id in tracker.tracked().filter(|id| now.contains(*id)) {
                prop_assert!(world.descendant[&id]);
            }
        }
    }
}
