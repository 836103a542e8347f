"""The SIMT interpreter: every thread of the launch at once, numpy over threads.

Threads are laid out CTA by CTA, warp by warp (thread t = slot * block_padded + linear tid),
so a warp is 32 consecutive entries.  Control flow is concrete: each thread has a PC; the
machine executes the smallest PC among live threads for all threads sitting on it (min-PC
scheduling: divergent paths run one after the other and reconverge where the PCs meet);
predicates and divergence are masks.  ``bar.sync`` is per CTA.

Registers hold raw bits (uint64 per thread).  In the ``check`` domain every byte also
carries a provenance tag (:mod:`formal.kernel.tags`), which moves with the bits through
registers, shared/global memory, shuffles, packs and permutes; arithmetic derives tags.
Matrix instructions go to :mod:`formal.evaluate` (bit patterns) or to the provenance
checker (:mod:`formal.kernel.provenance`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import tags as TG
from . import values as V
from .parse import Addr, Function, Imm, Instr, Module, Pair, Reg, Sym, Unsupported, Vec
from .spec import KernelSpec, SpecError, raw_dtype

from .values import GAP, GLOBAL_BASE, LOCAL_WINDOW, PARAM_BASE, SHARED_WINDOW, U64, _TYPES, _type_of  # noqa: F401


class KernelError(Exception):
    """Bad input discovered while running (a parameter the spec does not give, ...)."""


# instruction steps before a run is stopped (``--max-steps``): the corpus's longest launch
# (one 128x128 tile with K = 1024) takes 3,990; a loop that does not end stops here.  A step
# issues one instruction to the threads at it; one issued to more than STEP_THREADS threads
# counts as threads / STEP_THREADS steps, so the bound also bounds the work of huge launches
DEFAULT_MAX_STEPS = 100_000
STEP_THREADS = 4096


class StepLimit(Unsupported):
    """The run did not finish within the step bound (a loop that does not end, or a launch
    longer than ``max_steps``): exit 3, with the line where execution was."""

    def __init__(self, line: int, instruction: str, max_steps: int):
        self.max_steps = max_steps
        super().__init__(line, instruction, f"stopped after {max_steps} instruction steps (the bound --max-steps "
                                            f"{max_steps}; an instruction issued to more than {STEP_THREADS} threads "
                                            f"counts as threads/{STEP_THREADS} steps): execution was at this line; "
                                            "a loop that does not end?")


@dataclass
class Witness:
    kind: str
    cta: tuple
    warp: int
    lane: int
    line: int
    instruction: str
    register: str = ""
    arrived: str = ""
    wanted: str = ""
    path: list = field(default_factory=list)
    warpgroup: int | None = None        # warp // 4, in a kernel with warpgroup instructions (wgmma)

    def to_json(self) -> dict:
        d = {"kind": self.kind, "cta": list(self.cta), "warp": self.warp, "lane": self.lane, "line": self.line,
             "instruction": self.instruction, "register": self.register, "arrived": self.arrived,
             "wanted": self.wanted, "path": [{"line": a, "instruction": b} for a, b in self.path]}
        if self.warpgroup is not None:
            d["warpgroup"] = self.warpgroup
        return d

    def __str__(self) -> str:
        s = (f"{self.kind}: line {self.line}: {self.instruction}\n  CTA {tuple(self.cta)}, "
             + (f"warpgroup {self.warpgroup}, " if self.warpgroup is not None else "")
             + f"warp {self.warp}, lane {self.lane}" + (f", register {self.register}" if self.register else ""))
        if self.arrived:
            s += f"\n  arrived: {self.arrived}"
        if self.wanted:
            s += f"\n  wanted:  {self.wanted}"
        if self.path:
            s += "\n  path:\n" + "\n".join(f"    line {a}: {b}" for a, b in self.path)
        return s


class Region:
    """A byte-addressed memory: data, provenance tags, last store line, and for shared
    memory the race bookkeeping."""

    def __init__(self, name: str, size: int, check: bool, race: bool = False):
        self.name, self.size = name, size
        self.data = np.zeros(size, dtype=np.uint8)
        self.tags = np.zeros(size, dtype=np.int64) if check else None
        self.line = np.zeros(size, dtype=np.int32)
        self.src = np.full(size, -1, dtype=np.int64)     # instruction index of the last store
        self.udef = None                                 # [size] origin of an undefined byte (lazily)
        if race:
            self.writer = np.full(size, -1, dtype=np.int64)
            self.epoch = np.zeros(size, dtype=np.int64)
            self.pending = np.full(size, -1, dtype=np.int64)
            self.wtime = np.zeros(size, dtype=np.int64)      # step of the last generic-proxy write
            self.aproxy = np.zeros(size, dtype=bool)         # last written through the async proxy (TMA)
            self.reader = np.full(size, -1, dtype=np.int64)
            self.repoch = np.full(size, -1, dtype=np.int64)
            self.wwepoch = np.zeros(size, dtype=np.int64)    # warp barrier epoch of the writer at the write
            self.rwepoch = np.zeros(size, dtype=np.int64)    # ... of the reader at the read


class Machine:
    MAX_WITNESSES = 8

    def __init__(self, mod: Module, spec: KernelSpec, inputs: dict | None, arch: str = "sm_90",
                 check: bool = False, ctas=None, mma_bits: bool = True):
        self.mod, self.spec, self.arch, self.check = mod, spec, arch, check
        self.mma_bits = mma_bits
        from .bind import entry
        self.fn: Function = entry(mod, spec)
        self.instrs = self.fn.instrs
        self.witnesses: list[Witness] = []
        self.counts: dict[str, int] = {}
        self.issues: list[Witness] = []          # deferred witnesses (Machine.issue)
        self._issue_at: dict = {}
        self._reported: set[int] = set()
        self.exe = None                          # threads executing the current instruction
        self._init_all: set[str] = set()         # registers every launched thread has written
        # undefined values: a register read before any write holds an unspecified value; it is
        # followed (per thread and register, per memory byte) to where it is used: a stored
        # output, an address or a predicate is a witness, a dead value is not
        self.udef: dict[str, np.ndarray] = {}    # register -> [T] origin number (0: defined)
        self.undef_src: list[tuple] = []         # origin number - 1 -> (instruction, thread, register)
        self._uin = None                         # origins the current instruction read, per thread
        self.executed = 0
        self._setup_threads(ctas)
        self.cur_p = -1                          # index of the instruction executing
        from .asynchrony import AsyncState
        from .barriers import Barriers
        self.asy = AsyncState(self)              # wgmma groups, in-flight registers, fences (asynchrony.py)
        self.wg_kernel = any(i.head == "wgmma" for i in self.instrs)
        self.barriers = Barriers(self)           # CTA barriers and mbarriers (barriers.py)
        self.stay = None
        self._setup_memory(inputs or {})
        self.regs: dict[str, np.ndarray] = {}
        self.tags: dict[str, np.ndarray] = {}
        self.lastw: dict[str, np.ndarray] = {}
        self.wstep: dict[str, np.ndarray] = {}   # check: the step that last wrote a register (formal.kernel.exact)
        self.srcline: dict[str, np.ndarray] = {}
        self.prov = None
        if check:
            from .provenance import Provenance
            self.prov = Provenance(self)
            from .exact import Exact
            self.exact = Exact(self)
        self._steps: dict[int, object] = {}

    # ------------------------------------------------------------------ launch
    def _setup_threads(self, ctas):
        sp = self.spec
        bx, by, bz = sp.block
        bs = bx * by * bz
        self.bs = bs
        self.bsp = (bs + 31) // 32 * 32
        gx, gy, gz = sp.grid
        all_ctas = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
        if ctas is None:
            self.ctas = all_ctas
        else:
            cl = []
            for given in ctas:
                c = tuple(int(v) for v in (list(given) + [0, 0])[:3]) if not isinstance(given, int) else \
                    all_ctas[given] if 0 <= given < len(all_ctas) else None
                if c is None or c not in all_ctas:
                    raise SpecError(f"CTA {given} is not in the grid {sp.grid} ({len(all_ctas)} CTAs, "
                                    f"linear indices 0..{len(all_ctas) - 1})")
                cl.append(c)
            self.ctas = cl
        from .cluster import layout
        self.ctas = layout(sp, self.ctas)
        n = len(self.ctas)
        T = self.T = n * self.bsp
        t = np.arange(T)
        self.slot = t // self.bsp
        local = t % self.bsp
        self.valid = local < bs
        self.tid = (local % bx, (local // bx) % by, local // (bx * by))
        cta = np.array(self.ctas, dtype=np.int64).reshape(n, 3)
        self.ctaid = tuple(cta[self.slot, i] for i in range(3))
        self.lane = local % 32
        self.warp = local // 32
        self.gwarp = t // 32
        self.T = T
        from .cluster import Cluster
        self.cluster = Cluster(self)             # CTA groups, distributed shared memory (cluster.py)

    def _setup_memory(self, inputs):
        sp, mod, fn = self.spec, self.mod, self.fn
        # global buffers
        self.buffers = []
        off = 0
        self.buf_index = {}
        for i, b in enumerate(sp.buffers):
            nb = b.nbytes
            self.buffers.append((b, off, nb))
            self.buf_index[b.name] = i
            off += (nb + GAP + 255) // 256 * 256
        for v in sp.views:              # a view looks at its buffer's memory (no allocation, no tags)
            b, o, _ = self.buffers[self.buf_index[v.view_of]]
            self.buf_index[v.name] = len(self.buffers)
            self.buffers.append((v, o + v.elem_offset * max(v.bits // 8, 1), v.nbytes))
        gvars = [v for v in mod.vars if v.space == "global"]
        self.gvar_off = {}
        for v in gvars:
            off = (off + max(v.align, 1) - 1) // max(v.align, 1) * max(v.align, 1)
            self.gvar_off[v.name] = off
            off += v.size + GAP
        self.heap = Region("global", max(off, 1), self.check, race=True)
        for i, (b, o, nb) in enumerate(self.buffers[:len(sp.buffers)]):
            if b.name in inputs:
                arr = np.asarray(inputs[b.name])
                if tuple(arr.shape) != tuple(b.shape):
                    raise SpecError(f"input {b.name} has shape {list(arr.shape)}, the spec says {list(b.shape)}")
                self._write_buffer(b, o, arr)
            if self.check:
                # every element's bytes carry (buffer, element, byte)
                eb = max(b.bits // 8, 1)
                idx = np.arange(b.span)
                t = TG.make(TG.ELEM, i + 1, idx[:, None], np.arange(eb)[None, :], fmt=TG.fmt_code(b.type))
                self.heap.tags[o:o + b.span * eb] = t.ravel()[: nb]
        for v in gvars:
            if v.init:
                o = self.gvar_off[v.name]
                self.heap.data[o:o + len(v.init)] = np.frombuffer(v.init, dtype=np.uint8)
        # const
        cvars = [v for v in mod.vars if v.space == "const"]
        self.cvar_off, off = {}, 0
        for v in cvars:
            off = (off + max(v.align, 1) - 1) // max(v.align, 1) * max(v.align, 1)
            self.cvar_off[v.name] = off
            off += v.size
        self.const = Region("const", max(off, 1), self.check)
        for v in cvars:
            if v.init:
                o = self.cvar_off[v.name]
                self.const.data[o:o + len(v.init)] = np.frombuffer(v.init, dtype=np.uint8)
        # shared: static variables first, extern (dynamic) after them
        svars = [v for v in list(mod.vars) + fn.vars if v.space == "shared"]
        self.svar_off, off = {}, 0
        for v in svars:
            if not v.extern:
                a = max(v.align, 1)
                off = (off + a - 1) // a * a
                self.svar_off[v.name] = off
                off += v.size
        dyn = off
        for v in svars:
            if v.extern:
                a = max(v.align, 1)
                dyn = (off + a - 1) // a * a
        for v in svars:
            if v.extern:
                self.svar_off[v.name] = dyn
        self.S = max(dyn + sp.shared_bytes if any(v.extern for v in svars) else off, 1)
        self.shared = Region("shared", self.S * len(self.ctas), self.check, race=True)
        self.epoch = np.zeros(len(self.ctas), dtype=np.int64)
        self.wepoch = np.zeros(self.T // 32, dtype=np.int64)     # bar.warp.sync epochs per warp
        # local: per thread
        lvars = [v for v in fn.vars if v.space == "local"]
        self.lvar_off, off = {}, 0
        for v in lvars:
            a = max(v.align, 1)
            off = (off + a - 1) // a * a
            self.lvar_off[v.name] = off
            off += v.size
        self.L = max(off, 1)
        self.local = Region("local", self.L * self.T, self.check) if lvars else None
        # params: the spec bound to the entry (formal.kernel.bind checks every name and width)
        from .bind import param_block
        self.param_off, blob = param_block(mod, fn, sp, {b.name: GLOBAL_BASE + o for (b, o, nb) in
                                                         self.buffers[:len(sp.buffers)]})
        self.params = Region("param", max(len(blob), 1), self.check)
        self.params.data[:len(blob)] = np.frombuffer(bytes(blob), dtype=np.uint8)
        from .tma import tensormap_table
        self.tmaps = tensormap_table(self)       # address of each [[tensormap]] -> the map
        self.devmaps: dict = {}                  # maps in memory (built on the device): address -> decoded
        self.tma_release: dict = {}              # tensormap-proxy releases: address -> (step, line, text)
        self.tma_acquire: dict = {}              # acquires: address -> [(thread, step, CTA barrier epoch)]

    def _write_buffer(self, b, o, arr):
        eb = b.bits // 8
        if eb < 1:
            raise SpecError(f"buffer {b.name}: sub-byte element types are not supported as kernel buffers")
        dt = raw_dtype(b.type)
        a = arr.astype(dt)
        idx = np.zeros(a.shape, dtype=np.int64)
        for d, s in enumerate(b.strides):
            sh = [1] * a.ndim
            sh[d] = -1
            idx = idx + np.arange(a.shape[d]).reshape(sh) * s
        view = self.heap.data[o:o + b.span * eb].view(dt)
        view[idx.ravel()] = a.ravel()

    def read_buffer(self, name: str) -> np.ndarray:
        i = self.buf_index[name]
        b, o, nb = self.buffers[i]
        dt = raw_dtype(b.type)
        eb = b.bits // 8
        view = self.heap.data[o:o + b.span * eb].view(dt)
        idx = np.zeros(b.shape, dtype=np.int64)
        for d, s in enumerate(b.strides):
            sh = [1] * len(b.shape)
            sh[d] = -1
            idx = idx + np.arange(b.shape[d]).reshape(sh) * s
        return view[idx].copy()

    # ------------------------------------------------------------------ witnesses
    def witness(self, kind: str, ins: Instr, t: int, register: str = "", arrived: str = "", wanted: str = "",
                path=None) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if sum(1 for w in self.witnesses if w.kind == kind) >= self.MAX_WITNESSES:
            return
        t = int(t)
        cta = self.ctas[int(self.slot[t])]
        if path is None:
            path = self.path_of(register, t) if register else [(ins.line, ins.text)]
        self.witnesses.append(Witness(kind, cta, int(self.warp[t]), int(self.lane[t]), ins.line, ins.text, register,
                                      arrived, wanted, path, self._wg(t)))

    def _wg(self, t: int) -> int | None:
        """The warpgroup of thread t, in a kernel with wgmma instructions (else None)."""
        return int(self.warp[t]) // 4 if self.wg_kernel else None

    def issue(self, where, kind: str, ins: Instr, t: int, register: str = "", arrived: str = "", wanted: str = "",
              path=None) -> int:
        """A witness kept back until the value it concerns reaches a stored output (a wrong
        value nobody stores is no observable difference).  One per ``where`` (an instruction
        and what went wrong there); returns its number (>= 1) for tags / accumulators."""
        i = self._issue_at.get(where)
        if i is not None:
            return i
        if len(self.issues) >= TG.MAX_ISSUE:
            return TG.MAX_ISSUE
        # the texts may be given as functions: built only for the first occurrence
        arrived, wanted, path = (x() if callable(x) else x for x in (arrived, wanted, path))
        t = int(t)
        cta = self.ctas[int(self.slot[t])]
        if path is None:
            path = self.path_of(register, t) if register else [(ins.line, ins.text)]
        self.issues.append(Witness(kind, cta, int(self.warp[t]), int(self.lane[t]), ins.line, ins.text, register,
                                   arrived, wanted, path, self._wg(t)))
        i = self._issue_at[where] = len(self.issues)
        return i

    def report(self, i: int, note: str = "") -> None:
        """A deferred witness whose value reached an output: now a witness."""
        i = int(i)
        if i <= 0 or i in self._reported or i > len(self.issues):
            return
        self._reported.add(i)
        w = self.issues[i - 1]
        self.counts[w.kind] = self.counts.get(w.kind, 0) + 1
        if sum(1 for x in self.witnesses if x.kind == w.kind) >= self.MAX_WITNESSES:
            return
        if note:
            w = Witness(w.kind, w.cta, w.warp, w.lane, w.line, w.instruction, w.register, w.arrived + note, w.wanted,
                        w.path, w.warpgroup)
        self.witnesses.append(w)

    def path_of(self, reg: str, t: int, limit: int = 24) -> list:
        """The instructions a register's value came through, in program order: the last
        writers of the register and of its sources, the stores a load read from, and the
        address computations of those memory accesses (a few levels)."""
        seen: set[int] = set()
        todo = [(reg, 0)]
        while todo and len(seen) < limit:
            r, depth = todo.pop(0)
            lw = self.lastw.get(r)
            if lw is None or lw[t] < 0:
                continue
            i = int(lw[t])
            if i in seen:
                continue
            seen.add(i)
            ins = self.instrs[i]
            if ins.head in ("ld", "ldmatrix", "ldu"):
                todo += self._addr_regs(ins, depth)
                sl = self.srcline.get(r)
                if sl is not None and sl[t] >= 0 and int(sl[t]) not in seen:
                    j = int(sl[t])
                    seen.add(j)
                    st = self.instrs[j]
                    todo += self._addr_regs(st, depth)
                    todo += [(o.name, depth) for o in _flat_regs(st.ops[1:])]
                continue
            if ins.head in ("mma", "wmma"):
                continue                               # an accumulator's history is the mma itself
            nxt = depth + (1 if ins.head not in ("mov", "cvt", "prmt", "shfl", "movmatrix") else 0)
            if depth < 6:
                todo += [(o.name, nxt) for o in _flat_regs(ins.ops[1:]) if not o.name.startswith("%p")]
        return [(self.instrs[i].line, self.instrs[i].text) for i in sorted(seen)]

    def _addr_regs(self, ins, depth):
        if depth > 0:
            return []
        out = []
        for o in ins.ops:
            if isinstance(o, Addr) and isinstance(o.base, Reg):
                out.append((o.base.name, 4))          # address chains: three levels
        return out

    # ------------------------------------------------------------------ registers
    def width(self, name: str, ins: Instr) -> int:
        w = self.fn.regs.get(name)
        if w is None:
            raise Unsupported(ins.line, ins.text, f"register {name} is not declared")
        return w

    def special(self, name: str, ins: Instr) -> np.ndarray | None:
        base, _, comp = name.partition(".")
        ax = {"x": 0, "y": 1, "z": 2}.get(comp)
        sp = self.spec
        if base == "%tid" and ax is not None:
            return self.tid[ax].astype(U64)
        if base == "%ntid" and ax is not None:
            return np.full(self.T, sp.block[ax], dtype=U64)
        if base == "%ctaid" and ax is not None:
            return self.ctaid[ax].astype(U64)
        if base == "%nctaid" and ax is not None:
            return np.full(self.T, sp.grid[ax], dtype=U64)
        if name == "%laneid":
            return self.lane.astype(U64)
        if name == "%warpid":
            return self.warp.astype(U64)
        if name == "%nwarpid":
            return np.full(self.T, self.bsp // 32, dtype=U64)
        if name in ("%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge", "%lanemask_eq"):
            l = self.lane.astype(U64)
            one = U64(1)
            return {"%lanemask_lt": (one << l) - one, "%lanemask_le": (one << (l + one)) - one,
                    "%lanemask_eq": one << l, "%lanemask_gt": U64(0xFFFFFFFF) ^ ((one << (l + one)) - one),
                    "%lanemask_ge": U64(0xFFFFFFFF) ^ ((one << l) - one)}[name] & U64(0xFFFFFFFF)
        c = self.cluster.special(name)
        if c is not None:
            return c
        if name.startswith("%") and name not in self.fn.regs:
            if base in ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%clock",
                        "%clock64", "%globaltimer", "%nsmid", "%gridid", "%cluster_ctaid", "%clusterid",
                        "%cluster_nctaid", "%cluster_ctarank", "%dynamic_smem_size", "%total_smem_size"):
                if name == "%dynamic_smem_size":
                    return np.full(self.T, sp.shared_bytes, dtype=U64)
                raise Unsupported(ins.line, ins.text, f"special register {name}")
        return None

    def get(self, name: str, ins: Instr) -> np.ndarray:
        """A register read by the threads executing ``ins`` (``self.exe``).  A thread that never
        wrote it reads an unspecified value: the read is recorded as an origin of undefined
        values, which follow the data (``self.udef``) to where they are used."""
        v = self.regs.get(name)
        if v is None:
            s = self.special(name, ins)
            if s is not None:
                return s
            self.width(name, ins)
            v = self.regs[name] = np.zeros(self.T, dtype=bool if self.fn.regs[name] == 1 else U64)
        if self.exe is not None:
            if name not in self._init_all:
                self._uninit(name, ins)
            u = self.udef.get(name)
            if u is not None:
                self._uin = u.copy() if self._uin is None else np.maximum(self._uin, u)
            if name in self.asy.watch:
                self.asy.access(name, ins, self.exe, self.cur_p)
        return v

    def _uninit(self, name: str, ins: Instr) -> None:
        lw = self.lastw.get(name)
        if lw is not None and (lw[self.valid] >= 0).all():
            self._init_all.add(name)
            return
        u = self.udef.get(name)
        bad = self.exe & (True if lw is None else (lw < 0))
        if u is not None:
            bad &= u == 0
        if np.any(bad):
            t = int(np.flatnonzero(bad)[0])
            self.undef_src.append((ins, t, name))
            if u is None:
                u = self.udef[name] = np.zeros(self.T, np.int32)
            u[bad] = len(self.undef_src)

    def undef_of(self, name: str, tidx) -> np.ndarray | None:
        u = self.udef.get(name)
        return None if u is None else u[tidx]

    def note_undef(self, tidx, u) -> None:
        """The current instruction's threads ``tidx`` read undefined origins ``u``."""
        u = np.asarray(u, np.int32)
        if not u.any():
            return
        if self._uin is None:
            self._uin = np.zeros(self.T, np.int32)
        np.maximum.at(self._uin, np.asarray(tidx), u)

    def spread_undef(self, tids) -> None:
        """A warp-collective instruction: every lane's result may hold any lane's operands."""
        if self._uin is not None:
            w = self._uin[tids].max(axis=1)
            self._uin[tids] = w[:, None]

    def undef_witness(self, ins: Instr, t: int, origin: int, what: str) -> None:
        src, st, reg = self.undef_src[int(origin) - 1]
        self.witness("undefined", ins, t, "", f"{what} is computed from {reg}, which thread {st} (warp "
                     f"{int(self.warp[st])}, lane {int(self.lane[st])}) read at line {src.line} before any "
                     "instruction wrote it (an unspecified value)", "every register written before it is read",
                     path=[(src.line, src.text), (ins.line, ins.text)])

    def check_defined(self, name: str, ins: Instr, tidx, what: str) -> None:
        """An address or a predicate must not depend on an undefined value (it decides where
        the kernel reads, writes or goes: the concrete run would not be the kernel's)."""
        u = self.udef.get(name)
        if u is None:
            return
        uu = u[tidx]
        if uu.any():
            k = int(np.flatnonzero(uu)[0])
            self.undef_witness(ins, int(np.asarray(tidx).ravel()[k]) if np.ndim(tidx) else int(tidx), int(uu[k]), what)

    def undefined_outputs(self) -> None:
        """Every buffer byte the kernel stored from an undefined value: a witness (one per buffer)."""
        ud = self.heap.udef
        if ud is None:
            return
        for (b, o, nb) in self.buffers:
            u = ud[o:o + nb]
            hit = (u > 0) & (self.heap.src[o:o + nb] >= 0)
            if not hit.any():
                continue
            k = int(np.flatnonzero(hit)[0])
            eb = max(b.bits // 8, 1)
            el = k // eb
            co = []
            rest = el
            for s_ in sorted(range(len(b.strides)), key=lambda d: -b.strides[d]):
                co.append((s_, rest // b.strides[s_] if b.strides[s_] else 0))
                rest = rest % b.strides[s_] if b.strides[s_] else rest
            pos = [c for _, c in sorted(co)]
            ins = self.instrs[int(self.heap.src[o + k])]
            t = int(self.heap.writer[o + k]) if self.heap.writer[o + k] >= 0 else 0
            self.undef_witness(ins, t, int(u[k]), f"{b.name}[{']['.join(map(str, pos))}] (stored here)")

    def get_tags(self, name: str):
        return self.tags.get(name)

    def put(self, name: str, val, mask, ins: Instr, tags=None, idx: int = -1) -> None:
        w = self.width(name, ins)
        if w == 1:
            val = np.asarray(val, dtype=bool)
        else:
            val = np.asarray(val, dtype=U64)
            if w < 64:
                val = val & V.mask(w)
        full = mask is None or mask.all()
        if full:
            self.regs[name] = np.broadcast_to(val, (self.T,)).copy()
        else:
            old = self.regs.get(name)
            if old is None:
                old = np.zeros(self.T, dtype=bool if w == 1 else U64)
            self.regs[name] = np.where(mask, val, old)
        if self.check and w > 1:
            nb = (w + 7) // 8
            old = self.tags.get(name)
            if tags is None:
                if old is not None:
                    if full:
                        del self.tags[name]
                    else:
                        old = old.copy()
                        old[mask] = 0
                        self.tags[name] = old
            else:
                tg = np.asarray(tags)
                if tg.shape[1] != nb:
                    tg = (np.concatenate([tg, np.zeros((self.T, nb - tg.shape[1]), np.int64)], axis=1)
                          if tg.shape[1] < nb else tg[:, :nb])
                if full:
                    self.tags[name] = tg.copy()
                else:
                    base = old.copy() if old is not None else np.zeros((self.T, nb), np.int64)
                    base[mask] = tg[mask]
                    self.tags[name] = base
        if name in self.asy.watch:
            self.asy.access(name, ins, mask, idx)
        lw = self.lastw.get(name)
        if lw is None:
            lw = self.lastw[name] = np.full(self.T, -1, dtype=np.int32)
        if full:
            lw[:] = idx
        else:
            lw[mask] = idx
        if self.check:
            ws = self.wstep.get(name)
            if ws is None:
                ws = self.wstep[name] = np.zeros(self.T, dtype=np.int64)
            ws[mask if not full else slice(None)] = self.executed
        uin = self._uin
        sel = slice(None) if full else mask
        if uin is not None and uin[sel].any():
            u = self.udef.get(name)
            if u is None:
                u = self.udef[name] = np.zeros(self.T, np.int32)
            u[sel] = uin[sel]
        elif name in self.udef:
            if full:
                del self.udef[name]
            else:
                self.udef[name][mask] = 0

    # ------------------------------------------------------------------ operands
    def sym_value(self, name: str, ins: Instr) -> int:
        if name in self.svar_off:
            return self.svar_off[name]
        if name in self.gvar_off:
            return GLOBAL_BASE + self.gvar_off[name]
        if name in self.cvar_off:
            return self.cvar_off[name]
        if name in self.param_off:
            return PARAM_BASE + self.param_off[name]
        if self.local is not None and name in self.lvar_off:
            return self.lvar_off[name]
        if name == "WARP_SZ":
            return 32
        raise Unsupported(ins.line, ins.text, f"unknown symbol {name}")

    def value(self, op, ins: Instr, w: int = 64) -> np.ndarray:
        if isinstance(op, Reg):
            v = self.get(op.name, ins)
            if op.neg:
                return ~np.asarray(v, dtype=bool)
            return v
        if isinstance(op, Imm):
            v = op.value
            if op.kind == "f32" and w == 64:
                raise Unsupported(ins.line, ins.text, "f32 immediate in a 64-bit operand")
            return np.full(self.T, v & ((1 << 64) - 1), dtype=U64)
        if isinstance(op, Sym):
            return np.full(self.T, self.sym_value(op.name, ins), dtype=U64)
        if isinstance(op, Addr) and isinstance(op.base, Sym):
            return np.full(self.T, (self.sym_value(op.base.name, ins) + op.offset) & ((1 << 64) - 1), dtype=U64)
        raise Unsupported(ins.line, ins.text, f"operand {op}")

    def optags(self, op):
        if self.check and isinstance(op, Reg):
            return self.tags.get(op.name)
        return None

    # ------------------------------------------------------------------ run
    def run(self, max_steps: int | None = None) -> None:
        """Min-PC scheduling over the threads that can run: a thread parked at a barrier or an
        mbarrier wait (formal.kernel.barriers) is not picked until what it waits for happens;
        when no thread can run and some wait, a ``deadlock`` witness ends the run."""
        from .execute import execute
        n = len(self.instrs)
        pc = np.zeros(self.T, dtype=np.int64)
        alive = self.valid.copy()
        parked = np.zeros(self.T, dtype=bool)
        self.pc, self.alive, self.parked = pc, alive, parked
        steps = weight = 0
        max_steps = DEFAULT_MAX_STEPS if max_steps is None else int(max_steps)
        if max_steps < 1:
            raise SpecError(f"the step bound must be at least 1, got {max_steps}")
        uniform = True                       # every live thread at one pc and none parked
        deadlocked = False
        while True:
            if uniform:
                if not alive.any():
                    break
                p = int(pc[np.argmax(alive)])
                mask = alive
            else:
                ready = alive & ~parked
                if not ready.any():
                    if not alive.any():
                        break
                    if self.barriers.resolve() or self.cluster.resolve():
                        continue
                    stuck = parked & alive
                    if (stuck & ~self.cluster.waiting).any():
                        self.barriers.deadlock(skip=self.cluster.waiting)
                    else:
                        self.cluster.deadlock()
                    deadlocked = True
                    break
                p = int(pc[ready].min())
                mask = ready & (pc == p)
            if p >= n:
                alive[mask] = False          # fell off the end: exit
                uniform = False
                continue
            ins = self.instrs[p]
            exe = mask
            self._uin = None
            if ins.pred is not None:
                self.exe = mask
                pv = np.asarray(self.get(ins.pred, ins), dtype=bool)
                self.check_defined(ins.pred, ins, np.flatnonzero(mask), f"the guard predicate {ins.pred}")
                self._uin = None
                exe = mask & (~pv if ins.pred_neg else pv)
            n_at = int(np.count_nonzero(mask))
            steps += 1
            weight += 1 if n_at <= STEP_THREADS else -(-n_at // STEP_THREADS)
            if weight > max_steps:
                raise StepLimit(ins.line, ins.text, max_steps)
            self.executed += 1
            self.exe = exe
            self.cur_p = p
            self.stay = None                 # threads of this instruction that wait here (parked)
            jump = execute(self, p, ins, exe, mask)
            stay = self.stay
            if stay is not None and not stay.any():
                stay = None
            if jump is None and ins.head not in ("ret", "exit"):
                if stay is None:
                    if uniform:
                        pc += 1
                    else:
                        pc[mask] += 1
                    continue
                pc[mask & ~stay] += 1
            elif jump is not None:
                pc[mask & ~exe] += 1
                pc[exe] = jump
            else:
                alive &= ~exe
                pc[mask & ~exe] += 1
            live = pc[alive]
            uniform = live.size == 0 or (live.min() == live.max() and not parked[alive].any())
        self.steps = steps
        if not deadlocked:
            self.cluster.finish()


def _flat_regs(ops):
    for o in ops:
        if isinstance(o, Reg):
            yield o
        elif isinstance(o, Vec):
            yield from (x for x in o.items if isinstance(x, Reg))
        elif isinstance(o, Addr) and isinstance(o.base, Reg):
            yield o.base
        elif isinstance(o, Pair):
            yield o.first
