"""Clusters of CTAs in the kernel interpreter: distributed shared memory, the cluster special
registers, ``barrier.cluster`` and the ordering rules of remote shared-memory operations.

The interpreter already runs every CTA of the launch at once (formal.kernel.machine); a cluster
is a group of them (``cluster`` in the spec, ``.reqnctapercluster``) whose shared memories are one
window: a ``.shared::cluster`` address names (CTA rank in the cluster, offset).

* Addresses.  A ``.shared::cta`` address (an offset below ``1 << CLUSTER_SHIFT``) is also the
  ``.shared::cluster`` address of that offset in the executing CTA; ``mapa`` returns
  ``(rank + 1) << CLUSTER_SHIFT | offset`` (the interpreter's encoding; the hardware's is
  opaque to a correct kernel, which only passes mapa's result to ``.shared::cluster`` operands).
* ``barrier.cluster.arrive`` / ``wait`` (9.7.13.3.2 of the ISA): a phase completes when every
  non-exited thread of the cluster has arrived; a wait returns once the phase the thread arrived
  at has completed (a wait with no arrive before it is undefined).  ``.release`` (the default) /
  ``.relaxed`` arrive, ``.acquire`` (the default) wait; a phase with a relaxed arrive orders no
  memory (the CTAs' barrier epochs do not advance), except mbarrier inits fenced by
  ``fence.mbarrier_init.release.cluster``.
* Remote operations (an mbarrier arrive on another CTA's object, a multicast TMA write and its
  complete_tx) must be ordered after the destination's ``mbarrier.init`` by a cluster barrier
  (the init's CTA arrives after the init, the remote thread waits on that phase), and before the
  destination CTA exits (a thread of it waits on a phase the remote thread arrived at after the
  operation).  Either missing: a ``race`` witness naming both lines.
* Not modelled (exit 3): generic loads and stores to another CTA's shared memory, generic
  addresses of ``.shared::cluster`` windows.
"""

from __future__ import annotations

import numpy as np

from .parse import Unsupported
from .spec import SpecError
from .values import U64

CLUSTER_SHIFT = 24


def layout(spec, ctas: list) -> list:
    """The CTAs to run, whole clusters: a CTA listed alone brings its cluster's other CTAs (they run
    together on the hardware); a grid not divisible into clusters is a bad launch."""
    cl = tuple(spec.cluster)
    if any(g % c for g, c in zip(spec.grid, cl)):
        raise SpecError(f"{spec.source}: grid {list(spec.grid)} is not a whole number of clusters of "
                        f"{list(cl)} CTAs (each grid dimension must be a multiple of the cluster's)")
    if cl == (1, 1, 1):
        return ctas
    out, seen = [], set()
    for c in ctas:
        base = tuple(c[i] // cl[i] * cl[i] for i in range(3))
        for z in range(cl[2]):
            for y in range(cl[1]):
                for x in range(cl[0]):
                    k = (base[0] + x, base[1] + y, base[2] + z)
                    if k not in seen:
                        seen.add(k)
                        out.append(k)
    return out


class Cluster:
    def __init__(self, m):
        self.m = m
        sp = m.spec
        self.dims = cl = tuple(int(x) for x in sp.cluster)
        self.size = cl[0] * cl[1] * cl[2]
        ctas = np.array(m.ctas, dtype=np.int64).reshape(-1, 3)
        c = np.array(cl, dtype=np.int64)
        self.cid = ctas // c                                # cluster id per slot
        self.cta = ctas % c                                 # %cluster_ctaid per slot
        self.rank = self.cta[:, 0] + cl[0] * (self.cta[:, 1] + cl[1] * self.cta[:, 2])
        ng = np.array(sp.grid, dtype=np.int64) // c
        self.clin = self.cid[:, 0] + ng[0] * (self.cid[:, 1] + ng[1] * self.cid[:, 2])
        self.nclusters = int(ng.prod())
        self.slot_of = np.full((self.nclusters, self.size), -1, np.int64)
        self.slot_of[self.clin, self.rank] = np.arange(len(ctas))
        T = m.T
        self.arrived = np.zeros(T, np.int64)        # barrier.cluster arrivals of each thread
        self.observed = np.zeros(T, np.int64)       # phases whose completion each thread's waits saw
        self.phase = np.zeros(self.nclusters, np.int64)       # completed phases per cluster
        self.relaxed = np.zeros(self.nclusters, bool)          # a relaxed arrive in the current phase
        self.waiting = np.zeros(T, bool)
        self.wait_at: dict[int, int] = {}                      # thread -> instruction index
        self.init_at: dict[tuple, tuple] = {}      # mbarrier key -> (arrivals of the initialiser, line, text)
        self.unfenced: dict[int, list] = {}         # thread -> inits not yet fenced for a relaxed arrive
        self.far: dict[tuple, tuple] = {}        # (dst slot, src slot) -> (arrivals, thread, line, text)

    # ------------------------------------------------------------------ registers
    def special(self, name: str) -> np.ndarray | None:
        m = self.m
        base, _, comp = name.partition(".")
        ax = {"x": 0, "y": 1, "z": 2}.get(comp)
        s = m.slot
        if base == "%cluster_ctaid" and ax is not None:
            return self.cta[s, ax].astype(U64)
        if base == "%cluster_nctaid" and ax is not None:
            return np.full(m.T, self.dims[ax], dtype=U64)
        if base == "%clusterid" and ax is not None:
            return self.cid[s, ax].astype(U64)
        if base == "%nclusterid" and ax is not None:
            return np.full(m.T, m.spec.grid[ax] // self.dims[ax], dtype=U64)
        if name == "%cluster_ctarank":
            return self.rank[s].astype(U64)
        if name == "%cluster_nctarank":
            return np.full(m.T, self.size, dtype=U64)
        if name == "%is_explicit_cluster":
            return np.full(m.T, int("explicitcluster" in m.fn.directives or self.size > 1), dtype=bool)
        return None

    # ------------------------------------------------------------------ addresses
    def encode(self, ins, addr: np.ndarray, rank: np.ndarray, tidx: np.ndarray) -> np.ndarray:
        """mapa: the .shared::cluster address of ``addr``'s offset in CTA ``rank`` of each thread's cluster."""
        off = np.asarray(addr, dtype=np.int64) & ((1 << CLUSTER_SHIFT) - 1)
        r = np.asarray(rank, dtype=np.int64)
        bad = (r < 0) | (r >= self.size)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            self.m.witness("out-of-bounds", ins, int(tidx[k]), arrived=f"CTA rank {int(r[k])}",
                           wanted=f"a rank of the cluster's {self.size} CTAs (0..{self.size - 1})")
        return ((np.where(bad, 0, r) + 1) << CLUSTER_SHIFT | off).astype(U64)

    def target(self, ins, addr: np.ndarray, tidx: np.ndarray):
        """(slot, offset, ok) of each .shared::cluster address; an own-CTA offset is its CTA's."""
        m = self.m
        a = np.asarray(addr, dtype=np.int64)
        own = m.slot[tidx].astype(np.int64)
        r = (a >> CLUSTER_SHIFT) - 1
        off = a & ((1 << CLUSTER_SHIFT) - 1)
        far = r >= 0
        ok = np.ones(len(a), bool)
        slot = own.copy()
        if far.any():
            ok = ~far | (r < self.size)
            rr = np.clip(r, 0, self.size - 1)
            s = self.slot_of[self.clin[own], rr]
            slot = np.where(far, s, own)
            ok &= slot >= 0
            if not ok.all():
                k = int(np.flatnonzero(~ok)[0])
                m.witness("out-of-bounds", ins, int(tidx[k]), arrived=f"shared::cluster address {int(a[k]):#x} "
                          f"(CTA rank {int(r[k])})", wanted=f"a CTA of the cluster ({self.size} CTAs)")
                slot = np.where(ok, slot, own)
        return slot, off, ok

    # ------------------------------------------------------------------ barrier.cluster
    def arrive(self, ins, p: int, exe: np.ndarray) -> None:
        m = self.m
        tids = np.flatnonzero(exe)
        relaxed = "relaxed" in ins.parts
        again = tids[self.arrived[tids] > self.phase[self.clin[m.slot[tids]]]]
        if len(again):
            m.witness("undefined", ins, int(again[0]), arrived="a second barrier.cluster.arrive before the wait "
                      "for the first", wanted="arrive and wait alternate (9.7.13.3)")
            tids = np.setdiff1d(tids, again)
        if relaxed:
            for t in tids.tolist():
                for key in self.unfenced.pop(t, []):             # not released by this arrive
                    a, line, text = self.init_at[key]
                    self.init_at[key] = (a + 1, line, text)
            self.relaxed[np.unique(self.clin[m.slot[tids]])] = True
        else:
            for t in tids.tolist():
                self.unfenced.pop(t, None)
        self.arrived[tids] += 1
        for c in np.unique(self.clin[m.slot[tids]]).tolist():
            self._complete(int(c))

    def fence_init(self, exe: np.ndarray) -> None:
        """fence.mbarrier_init.release.cluster: the thread's inits are released by a relaxed arrive."""
        for t in np.flatnonzero(exe).tolist():
            self.unfenced.pop(t, None)

    def wait(self, ins, p: int, exe: np.ndarray) -> None:
        m = self.m
        tids = np.flatnonzero(exe)
        c = self.clin[m.slot[tids]]
        no = self.arrived[tids] <= self.observed[tids]
        if no.any():
            m.witness("undefined", ins, int(tids[np.flatnonzero(no)[0]]), arrived="barrier.cluster.wait with no "
                      "barrier.cluster.arrive of this thread before it", wanted="every wait preceded by an arrive "
                      "(9.7.13.3)")
        done = self.arrived[tids] <= self.phase[c]
        self.observed[tids[done]] = self.arrived[tids[done]]
        blocked = tids[~done]
        if len(blocked):
            sel = np.zeros(m.T, bool)
            sel[blocked] = True
            m.stay = sel if m.stay is None else (m.stay | sel)
            m.parked |= sel
            self.waiting |= sel
            for t in blocked.tolist():
                self.wait_at[t] = p

    def _members(self, c: int) -> np.ndarray:
        m = self.m
        return (self.clin[m.slot] == c) & m.valid

    def _complete(self, c: int) -> bool:
        m = self.m
        mem = self._members(c) & m.alive
        if not mem.any() or (self.arrived[mem] <= self.phase[c]).any():
            return False
        self.phase[c] += 1
        slots = np.flatnonzero(self.clin == c)
        if not self.relaxed[c]:
            m.epoch[slots] += 1                              # release / acquire: memory ordered
        self.relaxed[c] = False
        # waiters of this phase go on: those parked now move past their wait instruction
        w = self.waiting & (self.clin[m.slot] == c) & (self.arrived <= self.phase[c])
        if m.stay is not None:
            now = m.stay & w
            m.stay = m.stay & ~now
            m.parked &= ~now
            w &= ~now
            self.observed[now] = self.arrived[now]
        self.observed[w] = self.arrived[w]
        m.pc[w] += 1
        m.parked &= ~w
        self.waiting &= ~(self.clin[m.slot] == c) | (self.arrived > self.phase[c])
        return True

    def resolve(self) -> bool:
        """Phases that complete because threads exited; True if a thread can run again."""
        if not self.waiting.any():
            return False
        before = int(np.count_nonzero(self.m.parked))
        for c in np.unique(self.clin[self.m.slot[np.flatnonzero(self.waiting)]]).tolist():
            self._complete(int(c))
        return int(np.count_nonzero(self.m.parked)) < before

    def deadlock(self) -> None:
        m = self.m
        t = int(np.flatnonzero(self.waiting & m.alive)[0])
        c = int(self.clin[m.slot[t]])
        mem = self._members(c) & m.alive
        late = np.flatnonzero(mem & (self.arrived <= self.phase[c]))
        ins = m.instrs[self.wait_at.get(t, int(m.pc[t]))]
        who = ""
        if len(late):
            u = int(late[0])
            who = (f"; thread {int(m.tid[0][u])} of CTA {m.ctas[int(m.slot[u])]} (warp {int(m.warp[u])}) has not "
                   f"arrived: it is at line {m.instrs[min(int(m.pc[u]), len(m.instrs) - 1)].line}")
        m.witness("deadlock", ins, t, "", f"waits for phase {int(self.phase[c])} of the cluster barrier: "
                  f"{int(np.count_nonzero(mem & (self.arrived > self.phase[c])))} of {int(np.count_nonzero(mem))} "
                  f"live threads of the cluster have arrived" + who,
                  "every live thread of the cluster arrives (barrier.cluster.arrive)")

    # ------------------------------------------------------------------ remote operations
    def note_init(self, ins, key: tuple, t: int) -> None:
        self.init_at[key] = (int(self.arrived[t]), ins.line, ins.text)
        if self.size > 1:
            self.unfenced.setdefault(int(t), []).append(key)

    def remote(self, ins, key: tuple, t: int, what: str) -> None:
        """Thread ``t`` operates on the mbarrier / shared memory ``key`` = (slot, offset) of its cluster."""
        m = self.m
        src = int(m.slot[t])
        dst = int(key[0])
        if src == dst:
            return
        ia = self.init_at.get(key)
        if ia is not None and self.observed[t] <= ia[0]:
            m.witness("race", ins, t, arrived=f"{what} on the mbarrier at shared offset {key[1]:#x} of CTA "
                      f"{m.ctas[dst]}, initialised at line {ia[1]}, with no cluster barrier ordering the init "
                      "before it (the init's CTA arrives after the init, this thread waits for that phase)",
                      wanted="mbarrier.init, fence.mbarrier_init / barrier.cluster.arrive(.release) in the "
                      "initialising CTA, barrier.cluster.wait here before a remote operation (9.7.13.15)",
                      path=[(ia[1], ia[2]), (ins.line, ins.text)])
        k = (dst, src)
        prev = self.far.get(k)
        a = int(self.arrived[t])
        if prev is None or a >= prev[0]:
            self.far[k] = (a, t, ins.line, ins.text)

    def finish(self) -> None:
        """At the end of the run: each CTA whose shared memory other CTAs operated on waited for a
        cluster-barrier phase those CTAs arrived at after their last operation (else the memory
        was released while, on the hardware, they could still reach it)."""
        m = self.m
        for (dst, src), (a, t, line, text) in sorted(self.far.items()):
            mine = (m.slot == dst) & m.valid
            if int(self.observed[mine].max(initial=0)) > a:
                continue
            ins = next(i for i in m.instrs if i.line == line)
            m.witness("race", ins, t, arrived=f"operates on the shared memory of CTA {m.ctas[dst]}, and no thread "
                      f"of that CTA waits on a cluster barrier this thread arrives at afterwards: CTA {m.ctas[dst]} "
                      "may exit first (its shared memory is released)",
                      wanted="barrier.cluster.arrive here and barrier.cluster.wait in the destination CTA before it "
                      "exits (9.7.13.3)")


def check_remote_generic(m, ins, slot, tidx) -> None:
    if (slot != m.slot[tidx]).any():
        raise Unsupported(ins.line, ins.text, "loads and stores to another CTA's shared memory (distributed "
                                              "shared memory through generic ld/st) are not modelled")
