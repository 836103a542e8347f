"""Asynchrony as state, not as time (docs/kernel.md, "Hopper").

The interpreter executes an asynchronous operation when it is issued and keeps, beside the
values, the state that says when its results may be touched:

* **wgmma groups.**  Per thread: the number of ``wgmma.commit_group`` executed and the number of
  groups known complete (``wait_group N`` completes all but the N most recent).  A
  ``wgmma.mma_async`` belongs to the group its thread has open (= commits so far); its accumulator
  and A registers carry that group number until a wait covers it.  Touching one before (another
  instruction reading or writing it) is undefined behaviour: an ``in-flight`` witness.  Another
  wgmma of the same accumulator may chain on it (9.7.15.6, "accumulator register accesses across
  multiple wgmma.mma_async instructions of the same shape").
* **wgmma.fence.**  Per thread the step of its last ``wgmma.fence``; per watched register (every
  accumulator / A register of a wgmma of the module) the step and instruction of the last access
  by another instruction.  A wgmma reading a register accessed after the warp's last fence, or a
  wgmma with no fence before it, is a ``wgmma-fence`` witness (9.7.15.5.4).
* **Proxies.**  Shared memory written through the generic proxy (st.shared, cp.async, stmatrix)
  and then read through the async proxy (wgmma operands, TMA stores) needs a
  ``fence.proxy.async`` by the writer in between: per byte the step of its last generic write,
  per thread the step of its last proxy fence; a byte read while pfence[writer] < wtime is a
  ``proxy-fence`` witness.

Steps are the machine's instruction counter (``Machine.executed``): "after" is program order as
the interpreter scheduled it.
"""

from __future__ import annotations

import numpy as np

from .parse import Reg, Vec


def _vec_names(op) -> list[str]:
    if isinstance(op, Vec):
        return [x.name for x in op.items if isinstance(x, Reg)]
    return [op.name] if isinstance(op, Reg) else []


class AsyncState:
    def __init__(self, m):
        self.m = m
        T = m.T
        self.wg_commit = np.zeros(T, np.int64)
        self.wg_done = np.zeros(T, np.int64)
        self.wg_fence = np.full(T, -1, np.int64)
        self.wg_wait_at = np.full(T, -1, np.int64)      # instruction index of the thread's last wait_group
        self.wg_wait_step = np.full(T, -1, np.int64)    # ... and its step
        self.inflight: dict[str, np.ndarray] = {}       # register -> [T] group (-1: none)
        self.inflight_at: dict[str, np.ndarray] = {}    # register -> [T] instruction index of its wgmma
        self.inflight_step: dict[str, np.ndarray] = {}  # register -> [T] step of its wgmma
        self.touch: dict[str, np.ndarray] = {}          # register -> [T] step of the last other access
        self.touch_at: dict[str, np.ndarray] = {}       # ... and its instruction index
        self.pfence = np.full(T, -1, np.int64)
        self.in_wgmma = False
        self.setmaxnreg: dict[int, list] = {}          # warp -> instruction index of each setmaxnreg
        # shared bytes an in-flight wgmma reads: the issuing warpgroup's thread 0 and its group
        self.rd_thread = None                           # [shared bytes] (lazily)
        self.rd_group = None
        self.rd_at = None
        self.rd_step = None
        # bulk async-groups (TMA stores): committed / waited for, and the shared bytes they read
        self.bk_commit = np.zeros(T, np.int64)
        self.bk_done = np.zeros(T, np.int64)
        self.bk_thread = None
        self.bk_group = None
        self.bk_at = None
        watch: set[str] = set()
        for ins in m.instrs:
            if ins.head == "wgmma" and ins.form is not None and ins.form.family == "wgmma":
                watch.update(_vec_names(ins.ops[0]))
                if isinstance(ins.ops[1], Vec):
                    watch.update(_vec_names(ins.ops[1]))
        self.watch = watch

    # ------------------------------------------------------------------ register accesses
    def access(self, name: str, ins, mask, p: int) -> None:
        """Another instruction reads or writes watched register ``name`` on threads ``mask``."""
        if self.in_wgmma:
            return
        m = self.m
        sel = np.ones(m.T, bool) if mask is None else np.asarray(mask, bool)
        tc = self.touch.get(name)
        if tc is None:
            tc = self.touch[name] = np.full(m.T, -1, np.int64)
            self.touch_at[name] = np.full(m.T, -1, np.int64)
        tc[sel] = m.executed
        self.touch_at[name][sel] = p
        fl = self.inflight.get(name)
        if fl is None:
            return
        busy = sel & (fl >= 0) & (fl >= self.wg_done)
        if busy.any():
            t = int(np.flatnonzero(busy)[0])
            src = m.instrs[int(self.inflight_at[name][t])]
            m.witness("in-flight", ins, t, name,
                      f"{name} belongs to the wgmma.mma_async at line {src.line}, still in flight (its group is not "
                      f"covered by a wgmma.wait_group of this thread: {int(self.wg_commit[t])} groups committed, "
                      f"{int(self.wg_done[t])} waited for)",
                      "wgmma.wait_group covering the wgmma before its accumulator or A registers are touched "
                      "(9.7.15.6: undefined behaviour otherwise)",
                      path=[(src.line, src.text)] + self._wait_since(t, int(self.inflight_step[name][t]))
                      + [(ins.line, ins.text)])
            fl[busy] = -1                    # one witness per access, not one per later touch

    # ------------------------------------------------------------------ wgmma.fence / groups
    def fence(self, tids) -> None:
        self.wg_fence[tids] = self.m.executed

    def commit(self, tids) -> None:
        self.wg_commit[tids] += 1

    def _wait_since(self, t: int, step: int) -> list:
        """The thread's last wgmma.wait_group if it ran after ``step`` (it did not cover the wgmma): a
        path step, so a witness names the wait that was too shallow (or had no group to wait for)."""
        if self.wg_wait_step[t] > step:
            w = self.m.instrs[int(self.wg_wait_at[t])]
            return [(w.line, w.text)]
        return []

    def wait(self, tids, n: int, p: int = -1) -> None:
        self.wg_wait_at[tids] = p
        self.wg_wait_step[tids] = self.m.executed
        self.wg_done[tids] = np.maximum(self.wg_done[tids], self.wg_commit[tids] - n)
        for name in list(self.inflight):
            fl = self.inflight[name]
            if not ((fl >= 0) & (fl >= self.wg_done)).any():
                del self.inflight[name]
                del self.inflight_at[name]
                del self.inflight_step[name]

    def check_fenced(self, ins, tids, regs: list[str], what: str) -> None:
        """A wgmma reads ``regs`` (accumulator or A) on threads ``tids`` [G, 128]."""
        m = self.m
        t0 = tids.ravel()
        nofence = self.wg_fence[t0] < 0
        if nofence.any():
            t = int(t0[np.flatnonzero(nofence)[0]])
            # the path: the last access of a register it reads (the fence belongs between the two)
            last = max(((int(self.touch[r][t]), int(self.touch_at[r][t]), r) for r in regs if r in self.touch),
                       default=(-1, -1, ""))
            src = m.instrs[last[1]] if last[0] >= 0 else None
            m.witness("wgmma-fence", ins, t, last[2], "no wgmma.fence by this warp before this wgmma.mma_async"
                      + (f" (it reads {last[2]}, written at line {src.line})" if src is not None else ""),
                      "wgmma.fence before the first wgmma.mma_async of a warpgroup (9.7.15.5.4)",
                      path=([(src.line, src.text)] if src is not None else []) + [(ins.line, ins.text)])
            return
        for r in regs:
            tc = self.touch.get(r)
            if tc is None:
                continue
            late = tc[t0] > self.wg_fence[t0]
            if late.any():
                t = int(t0[np.flatnonzero(late)[0]])
                src = m.instrs[int(self.touch_at[r][t])]
                m.witness("wgmma-fence", ins, t, r,
                          f"{what} register {r} was accessed at line {src.line} after this warp's last wgmma.fence",
                          "wgmma.fence between a register access and a wgmma.mma_async that reads the register "
                          "(9.7.15.5.4)", path=[(src.line, src.text), (ins.line, ins.text)])
                return

    def issue(self, p: int, tids, regs: list[str]) -> None:
        """Registers of a wgmma issued by threads ``tids``: in flight in the thread's open group."""
        m = self.m
        t0 = tids.ravel()
        for r in regs:
            fl = self.inflight.get(r)
            if fl is None:
                fl = self.inflight[r] = np.full(m.T, -1, np.int64)
                self.inflight_at[r] = np.full(m.T, -1, np.int64)
                self.inflight_step[r] = np.full(m.T, -1, np.int64)
            fl[t0] = self.wg_commit[t0]
            self.inflight_at[r][t0] = p
            self.inflight_step[r][t0] = m.executed

    def reading(self, p: int, flat: np.ndarray, reader: np.ndarray) -> None:
        """A wgmma issued by ``reader`` (per byte) reads shared bytes ``flat`` asynchronously."""
        m = self.m
        if self.rd_thread is None:
            n = m.shared.size
            self.rd_thread = np.full(n, -1, np.int64)
            self.rd_group = np.zeros(n, np.int64)
            self.rd_at = np.full(n, -1, np.int64)
            self.rd_step = np.full(n, -1, np.int64)
        self.rd_thread[flat] = reader
        self.rd_group[flat] = self.wg_commit[reader]
        self.rd_at[flat] = p
        self.rd_step[flat] = m.executed

    def bulk_reading(self, p: int, flat: np.ndarray, t: int) -> None:
        """A TMA store issued by thread ``t`` reads shared bytes ``flat`` until its bulk group is waited for."""
        m = self.m
        if self.bk_thread is None:
            n = m.shared.size
            self.bk_thread = np.full(n, -1, np.int64)
            self.bk_group = np.zeros(n, np.int64)
            self.bk_at = np.full(n, -1, np.int64)
        self.bk_thread[flat] = t
        self.bk_group[flat] = self.bk_commit[t]
        self.bk_at[flat] = p

    def check_overwrite(self, ins, idx2: np.ndarray, writer: np.ndarray) -> None:
        self._overwrite(ins, idx2, writer, self.rd_thread, self.rd_group, self.rd_at, self.wg_done,
                        "the wgmma.mma_async", "wgmma.wait_group", self.rd_step)
        self._overwrite(ins, idx2, writer, self.bk_thread, self.bk_group, self.bk_at, self.bk_done,
                        "the TMA store", "cp.async.bulk.wait_group.read")

    def _overwrite(self, ins, idx2, writer, rd_thread, rd_group, rd_at, done, what, waiter, rd_step=None) -> None:
        """A write of shared bytes ``idx2`` [k, n] (writer thread per row) while a wgmma that reads
        them is in flight (its group not waited for by the thread that issued it): a witness."""
        if rd_thread is None:
            return
        t = rd_thread[idx2]
        busy = (t >= 0) & (rd_group[idx2] >= done[np.maximum(t, 0)])
        if not busy.any():
            return
        m = self.m
        k, j = (int(x[0]) for x in np.nonzero(busy))
        src = m.instrs[int(rd_at[idx2[k, j]])]
        r = int(t[k, j])
        m.witness("in-flight", ins, int(writer[k]), "",
                  f"overwrites shared byte {int(idx2[k, j] % m.S)}, read by {what} at line {src.line} "
                  f"(warp {int(m.warp[r])} of the CTA issued it) that is still in flight",
                  f"{waiter} covering it before the shared memory it reads is overwritten",
                  path=[(src.line, src.text)]
                  + (self._wait_since(r, int(rd_step[idx2[k, j]])) if rd_step is not None else [])
                  + [(ins.line, ins.text)])
        rd_thread[idx2[busy]] = -1

    # ------------------------------------------------------------------ proxies
    def proxy_fence(self, exe) -> None:
        self.pfence[exe] = self.m.executed

    def check_async_read(self, ins, reg, flat: np.ndarray, reader: np.ndarray, what: str) -> bool:
        """The async proxy reads shared bytes ``flat`` (flat indices into the shared region; reader
        thread per entry): each generic-proxy write must be followed by a proxy fence of its
        writer.  Returns False (and a witness) when one is not."""
        m = self.m
        wr = reg.writer[flat]
        gen = (wr >= 0) & ~reg.aproxy[flat]
        if not gen.any():
            return True
        stale = gen & (self.pfence[np.maximum(wr, 0)] < reg.wtime[flat])
        if not stale.any():
            return True
        k = np.unravel_index(int(np.flatnonzero(stale.ravel())[0]), stale.shape)
        w = int(wr[k])
        src = int(reg.src[flat[k]])
        sins = m.instrs[src] if src >= 0 else None
        m.witness("proxy-fence", ins, int(reader[k[0]] if np.ndim(reader) else reader), "",
                  f"{what} reads shared byte {int(flat[k] % m.S)}, written through the generic proxy by thread "
                  f"{int(m.tid[0][w])} (warp {int(m.warp[w])}, lane {int(m.lane[w])})"
                  + (f" at line {sins.line}" if sins else "") + " with no fence.proxy.async by that thread since",
                  "fence.proxy.async between generic-proxy writes and async-proxy reads of shared memory (9.7.13.4.1)",
                  path=([(sins.line, sins.text)] if sins else []) + [(ins.line, ins.text)])
        return False
