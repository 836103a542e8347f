"""Barriers as state: ``bar.sync`` / ``barrier.sync`` (named, with thread counts), ``bar.arrive``, and
``mbarrier`` objects (phase, pending arrivals, transaction bytes).

Threads that must wait are *parked*: the scheduler (``Machine.run``) does not pick them until the
state they wait for changes.

* A CTA barrier (id, expected threads) collects arrivals; when the expected number has arrived
  (all live threads of the CTA when no count is given: a thread that exited no longer counts) it
  completes, the CTA's barrier epoch advances (memory ordering for the race checks) and every
  parked thread moves past its barrier instruction.
* An mbarrier lives at a shared address of a CTA: ``init`` sets the expected arrival count and
  phase 0; ``arrive`` (count, default 1, per executing thread) and ``expect_tx`` / ``complete_tx``
  (TMA copies) change the pending counts; the phase completes when both reach zero, and the next
  phase starts with the expected count.  ``try_wait.parity P`` is true once the phase of parity P
  has completed (the current phase's parity differs from P); ``try_wait`` with a state operand
  (what ``arrive`` returned: the phase number) once the phase has moved on.  A thread whose wait
  is not yet true is parked at the ``try_wait`` and runs it again when any mbarrier changes
  (``test_wait`` never parks).
* When no thread can run and some wait: a ``deadlock`` witness names a waiting thread, its line,
  and the barrier's state (an arrival or transaction bytes that never come).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .parse import Reg, Unsupported
from .values import U64


@dataclass
class MBarrier:
    slot: int
    addr: int
    expected: int
    pending: int
    tx: int = 0
    phase: int = 0                   # phases completed so far (the current phase's number)
    line: int = 0                    # where it was initialised
    valid: bool = True
    seen: np.ndarray | None = None   # [T] phases each thread has observed complete (its waits)
    history: list = field(default_factory=list)   # (line, text) of what changed the current phase
    completed: dict = field(default_factory=dict)  # phase -> the history that completed it (the last few)
    init_at: tuple = (0, "")


class Barriers:
    def __init__(self, m):
        self.m = m
        self.cta: dict[tuple, np.ndarray] = {}          # (slot, id) -> arrived threads [T] bool
        self.cta_expected: dict[tuple, int | None] = {}
        self.cta_at: dict[tuple, np.ndarray] = {}       # (slot, id) -> pc of each arrived thread
        self.mbar: dict[tuple, MBarrier] = {}           # (slot, shared address) -> state
        self.mwait = np.zeros(m.T, bool)                # parked on an mbarrier
        self.mwait_key: dict[int, tuple] = {}           # thread -> (key, parity or state, instruction)
        # shared bytes a TMA copy wrote: the mbarrier (index into objs) and phase it completes with
        self.tma_obj = None
        self.tma_phase = None
        self.objs: list[MBarrier] = []

    # ------------------------------------------------------------------ CTA barriers
    def bar(self, ins, p: int, exe: np.ndarray, bar_id: int, count: int | None, wait: bool) -> None:
        m = self.m
        slots = np.unique(m.slot[exe])
        if count is None and not any(k[1] == bar_id and k[0] in set(slots.tolist()) for k in self.cta):
            here = np.zeros(len(m.ctas), bool)
            here[slots] = True
            if not (m.alive & here[m.slot] & ~exe).any():    # the whole of each CTA: complete now
                m.epoch[slots] += 1
                return
        for s in slots:
            key = (int(s), bar_id)
            arr = self.cta.get(key)
            if arr is None:
                arr = self.cta[key] = np.zeros(m.T, bool)
                self.cta_expected[key] = count
            elif count is not None and self.cta_expected[key] not in (None, count):
                t = int(np.flatnonzero(exe & (m.slot == s))[0])
                m.witness("undefined", ins, t, arrived=f"barrier {bar_id} with {count} threads while "
                          f"{self.cta_expected[key]} are expected by threads already waiting",
                          wanted="every arrival at a barrier names the same thread count (9.7.13.1)")
            arr |= exe & (m.slot == s)
            if wait:
                new = exe & (m.slot == s)
                m.stay = new if m.stay is None else (m.stay | new)
                m.parked |= new
            self._try_complete(key)

    def _expected(self, key) -> int:
        m = self.m
        n = self.cta_expected[key]
        if n is None:                    # every live thread of the CTA
            return int(np.count_nonzero(m.alive & (m.slot == key[0])))
        return n

    def _try_complete(self, key) -> bool:
        m = self.m
        arr = self.cta[key]
        if int(np.count_nonzero(arr)) < self._expected(key):
            return False
        waiting = arr & m.parked & ~self.mwait
        # threads parked here move past their barrier instruction (those executing it now advance
        # with the instruction itself: they are released from m.stay)
        if m.stay is not None:
            now = m.stay & arr
            m.stay = m.stay & ~arr
            waiting &= ~now
            m.parked &= ~now
        m.pc[waiting] += 1
        m.parked &= ~waiting
        m.epoch[key[0]] += 1
        del self.cta[key]
        del self.cta_expected[key]
        return True

    # ------------------------------------------------------------------ mbarriers
    def _key(self, ins, addr: int, t: int) -> tuple:
        return (int(self.m.slot[t]), int(addr))

    def get(self, ins, key, t: int) -> MBarrier | None:
        b = self.mbar.get(key)
        if b is None or not b.valid:
            self.m.witness("undefined", ins, t, arrived=f"no initialised mbarrier at shared address {key[1]:#x}",
                           wanted="mbarrier.init before any other mbarrier operation on the object (9.7.13.15)")
            return None
        return b

    def init(self, ins, key, count: int) -> None:
        if not 1 <= count <= (1 << 20) - 1:
            raise Unsupported(ins.line, ins.text, f"an mbarrier count of {count} (1 .. 2^20-1)")
        self.mbar[key] = MBarrier(key[0], key[1], count, count, line=ins.line, init_at=(ins.line, ins.text))

    def inval(self, key) -> None:
        b = self.mbar.get(key)
        if b is not None:
            b.valid = False

    def arrive(self, ins, key, t: int, count: int = 1, tx: int = 0) -> int:
        """One thread's arrive (with ``tx`` expected transaction bytes first); returns the phase
        the arrival belongs to (the state operand)."""
        b = self.get(ins, key, t)
        if b is None:
            return 0
        ph = b.phase
        b.tx += tx
        self._note(b, ins)
        if count > b.pending:
            self.m.witness("undefined", ins, t, arrived=f"{count} arrival(s) at an mbarrier with {b.pending} pending "
                           f"in its phase {b.phase}", wanted="no more arrivals than the phase expects (9.7.13.15)")
            count = b.pending
        b.pending -= count
        self._check(b)
        return ph

    def expect_tx(self, ins, key, t: int, tx: int) -> None:
        b = self.get(ins, key, t)
        if b is not None:
            b.tx += tx
            self._note(b, ins)
            self._check(b)

    def complete_tx(self, ins, key, t: int, nbytes: int) -> int:
        """A TMA copy's bytes arrive; returns the phase they count for."""
        b = self.get(ins, key, t)
        if b is None:
            return -1
        ph = b.phase
        b.tx -= nbytes
        self._note(b, ins)
        self._check(b)
        return ph

    @staticmethod
    def _note(b: MBarrier, ins) -> None:
        if not b.history or b.history[-1][0] != ins.line:
            b.history.append((ins.line, ins.text))
            del b.history[:-12]

    def _check(self, b: MBarrier) -> None:
        if b.pending == 0 and b.tx == 0:
            b.completed[b.phase] = b.history
            b.completed.pop(b.phase - 4, None)
            b.phase += 1
            b.pending = b.expected
            b.history = []
            self.m.parked &= ~self.mwait          # every mbarrier waiter runs its try_wait again
            self.mwait[:] = False

    def done(self, key, parity: int | None, state: int | None) -> bool:
        b = self.mbar.get(key)
        if b is None:
            return False
        if parity is not None:
            return (b.phase & 1) != (parity & 1)
        return b.phase != state

    def observe(self, key, tids: np.ndarray) -> None:
        """Threads whose wait returned true have seen every phase completed so far."""
        b = self.mbar[key]
        if b.seen is None:
            b.seen = np.zeros(self.m.T, np.int64)
        b.seen[tids] = b.phase

    # ------------------------------------------------------------------ bytes TMA wrote
    def tma_written(self, flat: np.ndarray, b: MBarrier | None, phase: int) -> None:
        m = self.m
        if self.tma_obj is None:
            self.tma_obj = np.full(m.shared.size, -1, np.int32)
            self.tma_phase = np.zeros(m.shared.size, np.int64)
        if b is None:
            self.tma_obj[flat] = -1
            return
        if not self.objs or self.objs[-1] is not b:
            if b not in self.objs:
                self.objs.append(b)
        self.tma_obj[flat] = self.objs.index(b)
        self.tma_phase[flat] = phase

    def generic_write(self, idx2) -> None:
        if self.tma_obj is not None:
            self.tma_obj[idx2] = -1

    def read_check(self, ins, tt: np.ndarray, idx2: np.ndarray) -> None:
        """Threads ``tt`` (per row) read shared bytes ``idx2`` [k, n]: a byte a TMA copy wrote must
        be read after a wait of the reader that saw the copy's phase complete."""
        if self.tma_obj is None:
            return
        o = self.tma_obj[idx2]
        sel = o >= 0
        if not sel.any():
            return
        m = self.m
        rows, cols = np.nonzero(sel)
        oo = o[rows, cols]
        order = np.argsort(oo, kind="stable")
        uniq, starts = np.unique(oo[order], return_index=True)
        ends = np.append(starts[1:], len(oo))
        seen = np.zeros(len(oo), np.int64)
        for oi, a, e in zip(uniq, starts, ends):
            b = self.objs[int(oi)]
            if b.seen is not None:
                i = order[a:e]
                seen[i] = b.seen[tt[rows[i]]]
        late = seen <= self.tma_phase[idx2[rows, cols]]
        bad = np.zeros(o.shape, bool)
        bad[rows[late], cols[late]] = True
        if not bad.any():
            return
        k, j = (int(x[0]) for x in np.nonzero(bad))
        b = self.objs[int(o[k, j])]
        src = int(m.shared.src[idx2[k, j]])
        sins = m.instrs[src] if src >= 0 else None
        ph = int(self.tma_phase[idx2[k, j]])
        # what completed the phase before the copy's (an expect_tx that counted too few bytes shows there)
        before = [x for x in b.completed.get(ph - 1, []) if sins is None or x[0] != sins.line]
        m.witness("async-pending", ins, int(tt[k]), "",
                  f"reads shared byte {int(idx2[k, j] % m.S)}, written by the TMA copy"
                  + (f" at line {sins.line}" if sins else "")
                  + f" that completes phase {int(self.tma_phase[idx2[k, j]])} of the mbarrier at shared address "
                  f"{b.addr:#x}; this thread has not waited for that phase",
                  "an mbarrier wait that sees the copy's phase complete before its bytes are read (9.7.13.15)",
                  path=before + ([(sins.line, sins.text)] if sins else []) + [(ins.line, ins.text)])
        self.tma_obj[idx2[bad]] = -1

    def park_wait(self, ins, p: int, tids: np.ndarray, key, what) -> None:
        m = self.m
        sel = np.zeros(m.T, bool)
        sel[tids] = True
        m.stay = sel if m.stay is None else (m.stay | sel)
        m.parked |= sel
        self.mwait |= sel
        self.mwait_key[int(tids[0])] = (key, what, p)
        self._last_wait = (key, what, p, int(tids[0]))

    # ------------------------------------------------------------------ nothing can run
    def resolve(self) -> bool:
        """Barriers that complete because threads exited; True if a thread can run again."""
        before = int(np.count_nonzero(self.m.parked))
        for key in list(self.cta):
            self._try_complete(key)
        return int(np.count_nonzero(self.m.parked)) < before

    def deadlock(self, skip=None) -> None:
        m = self.m
        stuck = np.flatnonzero(m.parked & m.alive & (True if skip is None else ~skip))
        t = int(stuck[0])
        # the most telling waiter: one whose mbarrier has transaction bytes outstanding (a copy that
        # never lands or one that brought other bytes than expected), else the first
        for u in stuck:
            k = self.mwait_key.get(int(u))
            bb = self.mbar.get(k[0]) if k is not None and self.mwait[u] else None
            if bb is not None and bb.tx != 0:
                t = int(u)
                break
        ins = m.instrs[int(m.pc[t])]
        waiting = int(np.count_nonzero(m.parked & m.alive))
        gone = int(np.count_nonzero(m.valid & ~m.alive))
        b = None
        if self.mwait[t] and getattr(self, "_last_wait", None) is not None:
            key = self.mwait_key.get(t, self._last_wait)[0]
            b = self.mbar.get(key)
            what = (f"waits on the mbarrier at shared address {key[1]:#x} (initialised at line {b.line}) for the "
                    f"completion of its phase {b.phase}: {b.pending} of {b.expected} arrivals and {b.tx} transaction "
                    f"bytes still pending" if b is not None else f"waits on shared address {key[1]:#x}")
        else:
            keys = [k for k, arr in self.cta.items() if arr[t]]
            k = keys[0] if keys else (int(m.slot[t]), 0)
            arr = self.cta.get(k)
            what = (f"waits at barrier {k[1]}: {int(np.count_nonzero(arr)) if arr is not None else 0} of "
                    f"{self._expected(k) if k in self.cta_expected else '?'} threads have arrived")
        path = None
        if self.mwait[t] and getattr(self, "_last_wait", None) is not None and b is not None:
            path = [b.init_at] + b.history + [(ins.line, ins.text)]
        m.witness("deadlock", ins, t, "", what + f"; no thread can run ({waiting} waiting, {gone} exited)",
                  "every wait completed by arrivals and transaction bytes that happen", path=path)


def _groups(m, ins, op, tidx):
    """The executing threads grouped by the mbarrier they address: [(key, thread indices, positions)]."""
    from .memory import addresses
    addr = addresses(m, ins, op, tidx).astype(np.int64)
    slot, off, _ = m.cluster.target(ins, addr, tidx)      # .shared::cluster: another CTA's object
    code = slot << 40 | off
    u, inv = np.unique(code, return_inverse=True)
    out = []
    for k, c in enumerate(u):
        pos = np.flatnonzero(inv == k)
        out.append(((int(c) >> 40, int(c) & ((1 << 40) - 1)), tidx[pos], pos))
    return out


def _operand(m, ins, op, tidx):
    return np.asarray(m.value(op, ins, 32), dtype=U64)[tidx].astype(np.int64) & 0xFFFFFFFF


def mbarrier(m, p: int, ins, exe) -> None:
    """The mbarrier instructions (9.7.13.15), threads grouped by the object they address (arrivals
    of one instruction are unordered: the order does not change the phase they complete)."""
    parts = ins.parts
    op = parts[1]
    B = m.barriers
    tidx = np.flatnonzero(exe)
    if "shared::cluster" not in parts and "shared::cta" not in parts and "shared" not in parts:
        raise Unsupported(ins.line, ins.text, "mbarrier objects in generic memory")
    if op == "init":
        cnt = _operand(m, ins, ins.ops[1], tidx)
        for key, ts, pos in _groups(m, ins, ins.ops[0], tidx):
            B.init(ins, key, int(cnt[pos[0]]))
            m.cluster.note_init(ins, key, int(ts[0]))
        return None
    if op == "inval":
        for key, ts, pos in _groups(m, ins, ins.ops[0], tidx):
            B.inval(key)
        return None
    if op in ("arrive", "arrive_drop"):
        if op == "arrive_drop":
            raise Unsupported(ins.line, ins.text, "mbarrier.arrive_drop")
        if "noComplete" in parts:
            raise Unsupported(ins.line, ins.text, ".noComplete")
        d = ins.ops[0]
        rest = ins.ops[2:]
        cnt = np.ones(len(tidx), np.int64)
        tx = np.zeros(len(tidx), np.int64)
        if "expect_tx" in parts:
            if not rest:
                raise Unsupported(ins.line, ins.text, "expect_tx without txCount")
            tx = _operand(m, ins, rest[0], tidx)
            rest = rest[1:]
        if rest:
            cnt = _operand(m, ins, rest[0], tidx)
        state = np.zeros(m.T, U64)
        for key, ts, pos in _groups(m, ins, ins.ops[1], tidx):
            m.cluster.remote(ins, key, int(ts[0]), "mbarrier.arrive")
            state[ts] = B.arrive(ins, key, int(ts[0]), int(cnt[pos].sum()), int(tx[pos].sum()))
        if isinstance(d, Reg):
            m.put(d.name, state, exe, ins, None, p)
        return None
    if op in ("expect_tx", "complete_tx"):
        tx = _operand(m, ins, ins.ops[1], tidx)
        for key, ts, pos in _groups(m, ins, ins.ops[0], tidx):
            m.cluster.remote(ins, key, int(ts[0]), f"mbarrier.{op}")
            (B.expect_tx if op == "expect_tx" else B.complete_tx)(ins, key, int(ts[0]), int(tx[pos].sum()))
        return None
    if op in ("try_wait", "test_wait"):
        dst = ins.ops[0]
        if not isinstance(dst, Reg):
            raise Unsupported(ins.line, ins.text, "the wait's result must be a predicate register")
        if len(ins.ops) < 3:
            raise Unsupported(ins.line, ins.text, "a wait without its state / parity operand")
        parity = "parity" in parts
        arg = np.asarray(m.value(ins.ops[2], ins, 64), dtype=U64)[tidx].astype(np.int64)
        res = np.zeros(m.T, bool)
        ran = exe.copy()
        for key, ts, pos in _groups(m, ins, ins.ops[1], tidx):
            if key[0] != int(m.slot[ts[0]]):
                raise Unsupported(ins.line, ins.text, "a wait on another CTA's mbarrier (PTX allows .shared::cta)")
            if B.get(ins, key, int(ts[0])) is None:
                continue
            a = arg[pos]
            ok = np.array([B.done(key, int(x) if parity else None, None if parity else int(x)) for x in np.unique(a)])
            okt = ok[np.searchsorted(np.unique(a), a)]
            if okt.any():
                res[ts[okt]] = True
                B.observe(key, ts[okt])
            if (~okt).any() and op == "try_wait":
                blocked = ts[~okt]
                ran[blocked] = False
                B.park_wait(ins, p, blocked, key, None)
        m.put(dst.name, res, ran, ins, None, p)
        return None
    raise Unsupported(ins.line, ins.text, f"mbarrier.{op}")
