"""Conversions written as bit tricks, decided by exhaustion.

Compilers upcast narrow elements without ``cvt``: Triton turns ``s8 -> bf16`` into ``prmt``
(a byte under the exponent of 128.0), ``and`` masks and ``sub.rn.bf16x2`` of a magic constant.
The provenance tags see an ``.s8`` element read as ``.bf16`` (a wrong type) though the value is
exact.  When a typed arithmetic instruction misreads its sources this way, its result is
rebuilt as a function of the elements it came from and decided over all of their values:

* the *slice*: walking back from the instruction's sources through the instructions that last
  wrote them (per thread), down to immediates, registers no data reached (constants) and
  *leaves*: registers loaded from memory or holding only bytes of elements themselves (their
  tags say which element byte each is).  Predicates (guards, ``selp``) are followed too.  A
  source must have been written before the instruction that read it and not since (the
  machine's per-register write step), else the slice is not the one that ran: no decision.
* the elements the leaves hold, at most 16 bits in all, take every value at once (one lane
  per value, at most 65,536) and the slice runs through the machine's own instruction
  handlers; every guard must hold in every lane (else the path depends on the element).
* each result element (each half of an ``x2`` result) is the exact conversion
  (``cvt.rn``) of one of the elements for every value -- a proof; a converted element tag
  replaces the wrong-type issue -- or it is not, and the issue names the first element
  value where it differs.

Like the rest of the check domain, control flow is the run's (branches are assumed not to
depend on element values; the guards inside the slice are checked) and a byte no element reached
(tag 0) is a constant.
"""

from __future__ import annotations

import numpy as np

from . import tags as TG
from . import values as V
from .parse import Imm, Pair, Reg, Sym, Vec
from .values import U64

MAX_BITS = 16            # element bits varied at once (65,536 lanes)
MAX_NODES = 48           # instructions in a slice
_LOADS = ("ld", "ldu", "ldmatrix")
_EVAL = {"add", "sub", "mul", "mad", "fma", "min", "max", "neg", "abs", "and", "or", "xor", "not", "shl", "shr",
         "bfe", "bfi", "lop3", "popc", "clz", "brev", "prmt", "cvt", "mov", "selp", "setp"}


class _GiveUp(Exception):
    pass


class _Lanes:
    """A stand-in machine whose threads are the element values (check off: values only)."""
    check = False
    prov = None

    def __init__(self, m, L):
        self.m, self.T, self.fn, self._steps = m, L, m.fn, m._steps
        self.regs: dict[str, np.ndarray] = {}
        self.exe = np.ones(L, bool)

    def width(self, name, ins):
        return self.m.width(name, ins)

    def get(self, name, ins):
        v = self.regs.get(name)
        if v is None:
            raise _GiveUp(name)
        return v

    def value(self, op, ins, w=64):
        return type(self.m).value(self, op, ins, w)        # the machine's operand decoding, on this slice

    def sym_value(self, name, ins):
        return self.m.sym_value(name, ins)

    def optags(self, op):
        return None

    def put(self, name, val, mask, ins, tags=None, idx=-1):
        w = self.width(name, ins)
        if w == 1:
            self.regs[name] = np.broadcast_to(np.asarray(val, bool), (self.T,)).copy()
        else:
            self.regs[name] = np.broadcast_to(np.asarray(val, U64) & V.mask(w), (self.T,)).copy()


def _sources(ins):
    """Registers an evaluable instruction reads (guard included)."""
    out = []
    for o in ins.ops[1:]:
        if isinstance(o, Reg):
            out.append(o.name)
        elif isinstance(o, Vec):
            out += [x.name for x in o.items if isinstance(x, Reg)]
        elif not isinstance(o, (Imm, Sym)):
            raise _GiveUp(str(o))
    if ins.pred is not None:
        out.append(ins.pred)
    return out


def _evaluable(ins) -> bool:
    if ins.head not in _EVAL or "approx" in ins.parts or "full" in ins.parts:
        return False
    d = ins.ops[0] if ins.ops else None
    return isinstance(d, (Reg, Pair)) or (ins.head == "mov" and isinstance(d, Vec))


def _dests(ins) -> list:
    """Registers an instruction writes (its first operand; both of a pair)."""
    d = ins.ops[0] if ins.ops else None
    if isinstance(d, Reg):
        return [d.name]
    if isinstance(d, Pair):
        return [x.name for x in (d.first, d.second) if isinstance(x, Reg)]
    if isinstance(d, Vec):
        return [x.name for x in d.items if isinstance(x, Reg)]
    return []


# the resolution of a register read, per thread (>= 0: the node that wrote it)
FAIL, CONST, LEAF = -1, -2, -3


class _Node:
    def __init__(self, i, anchor, stamp=None):
        self.i = i                  # instruction index
        self.anchor = anchor        # the node whose step bounds it: itself (ran at ``stamp``), or a later one
        self.stamp = stamp          # [n] the step it ran at (a node the machine's last write names)
        self.mask = None            # [n] threads whose slice holds it
        self.reads: list = []       # (register, [n] resolution)


class Exact:
    def __init__(self, m):
        self.m = m
        self.cache: dict = {}
        self.proved = 0            # result elements proved exact conversions (per thread, per half)
        self.decided = 0           # distinct slices decided by exhaustion
        self._targets = set(m.fn.labels.values())
        self._writers: dict = {}
        self._convs: dict = {}

    # ------------------------------------------------------------------ straight-line code
    def _static_def(self, r, j):
        """The last instruction before j, in j's straight-line code (no label in between), that
        writes r, or None: a thread at j ran it, in program order."""
        key = (r, j)
        if key not in self._writers:
            i, found = j - 1, None
            while i >= 0 and (i + 1) not in self._targets:
                if r in _dests(self.m.instrs[i]):
                    found = i
                    break
                i -= 1
            self._writers[key] = found
        return self._writers[key]

    def _written_between(self, r, lo, hi) -> bool:
        return any(r in _dests(self.m.instrs[i]) for i in range(lo, hi))

    # ------------------------------------------------------------------ the slice
    def _slice(self, p, S):
        """The instructions the result of p is computed by, per thread of S: nodes (instruction,
        anchor) and, per register each reads, where its value came from.  A value comes from the
        last writer before the reader in the reader's straight-line code (a static node, run again
        here), or, where the code reaches back over a label, from the machine's state: the
        register's last write (a node whose step is known), a leaf (a register holding only raw
        element bytes, or loaded from memory) or a constant (never written) -- valid only if the
        register was not written since the reader ran (its write step before the reader's)."""
        m = self.m
        n = len(S)
        ok = np.ones(n, bool)
        root = _Node(p, None, np.full(n, m.executed, np.int64))
        root.anchor = root
        root.mask = np.ones(n, bool)
        nodes = [root]
        index = {("root",): 0}
        todo = [0]
        while todo:
            N = nodes[todo.pop()]
            ins = m.instrs[N.i]
            A = N.anchor
            for r in _sources(ins):
                res = np.full(n, FAIL, np.int64)
                need = N.mask & ok
                i = self._static_def(r, N.i)
                dyn = need.copy()
                if i is not None:
                    # the machine's last write of r is this one if nothing wrote r after it up to A
                    lw = m.lastw.get(r)
                    ws = m.wstep.get(r)
                    cur = (lw[S] == i) & (ws[S] < A.stamp) if lw is not None else np.zeros(n, bool)
                    cur &= m.instrs[i].pred is None and not self._written_between(r, i + 1, A.i)
                    dyn = need & cur
                    stat = need & ~cur
                    if stat.any():
                        wi = m.instrs[i]
                        if wi.pred is not None or not _evaluable(wi):
                            ok &= ~stat
                        else:
                            k = self._node(nodes, index, todo, ("s", i, id(A)), i, A, None, stat)
                            res[stat] = k
                elif self._written_between(r, N.i, A.i):
                    ok &= ~need                            # r changed between the reader and its anchor
                    dyn[:] = False
                if dyn.any():
                    self._dynamic(nodes, index, todo, r, S, A, dyn, res, ok)
                N.reads.append((r, res))
                if len(nodes) > MAX_NODES:
                    raise _GiveUp("slice too large")
        return nodes, ok

    def _node(self, nodes, index, todo, key, i, anchor, stamp, mask):
        k = index.get(key)
        if k is None:
            N = _Node(i, anchor, stamp)
            if anchor is None:
                N.anchor = N
            N.mask = mask.copy()
            k = index[key] = len(nodes)
            nodes.append(N)
            todo.append(k)
        else:
            N = nodes[k]
            if (mask & ~N.mask).any():              # more threads: read again for them
                N.mask |= mask
                N.reads = []
                todo.append(k)
            if stamp is not None:
                N.stamp = np.where(mask, stamp, N.stamp)
        return k

    def _dynamic(self, nodes, index, todo, r, S, A, dyn, res, ok):
        """r as the machine holds it now, for the threads ``dyn`` whose anchor A ran after r was
        last written."""
        m = self.m
        n = len(S)
        lw = m.lastw.get(r)
        ws = m.wstep.get(r)
        w_at = lw[S].astype(np.int64) if lw is not None else np.full(n, -1, np.int64)
        st_at = ws[S] if ws is not None else np.zeros(n, np.int64)
        written = w_at >= 0
        bad = dyn & written & (st_at >= A.stamp)
        ok &= ~bad
        dyn = dyn & ~bad
        res[dyn & ~written] = CONST
        if m.fn.regs.get(r, 0) == 1:                               # a predicate: always followed
            leafish = np.zeros(n, bool)
        else:
            tg = m.tags.get(r)
            if tg is None:
                data = np.zeros(n, bool)
                raw = np.ones(n, bool)
            else:
                t = tg[S]
                isdat = t != 0
                rawb = (TG.kind(t) == TG.ELEM) & (TG.deriv(t) == TG.RAW)
                data = isdat.any(axis=1)
                raw = (~isdat | rawb).all(axis=1)
            loaded = np.zeros(n, bool)
            for j in np.unique(w_at[dyn & written]):
                if m.instrs[int(j)].head in _LOADS:
                    loaded |= w_at == j
            # a leaf: an element's own bytes beside bytes no element reached (constants, as everywhere
            # in the check domain), or a load's result
            leafish = raw & (data | loaded)
            ok &= ~(dyn & written & loaded & ~raw)                 # loaded bytes that are not raw elements
        res[dyn & written & leafish] = LEAF
        trace = dyn & written & ~leafish & ok
        for j in np.unique(w_at[trace]):
            sel = trace & (w_at == j)
            wi = m.instrs[int(j)]
            if not _evaluable(wi):
                ok &= ~sel
                continue
            res[sel] = self._node(nodes, index, todo, ("d", int(j)), int(j), None, st_at, sel)

    def convert(self, ins, p, et: str, tg, iss):
        """Tags of the result of typed arithmetic instruction ``p`` (``et`` per element; tags
        [T, nb]; ``iss`` [T]: the issue of a misread source, or None): the elements that are
        exact conversions of one element get converted-element tags; the rest keep the issue."""
        m = self.m
        from .execute import _poison
        out = _poison(tg, iss)
        if tg is None:
            return out
        eb = V.type_bits(et) // 8
        halves = tg.shape[1] // eb
        sel = (np.asarray(iss) > 0) if iss is not None else np.zeros(m.T, bool)
        if halves > 1:                                                   # packed halves: one element each?
            sel |= (TG.kind(tg) == TG.GARBLED).any(axis=1)
        S = np.flatnonzero(sel & m.exe)
        if not len(S):
            return out
        try:
            nodes, ok = self._slice(p, S)
        except _GiveUp:
            return out
        n = len(S)
        reads = [(k, r, res) for k, N in enumerate(nodes) for r, res in N.reads]
        leaves = sorted({r for _, r, res in reads if (res == LEAF).any()})
        consts = sorted({r for _, r, res in reads if (res == CONST).any()})
        if not leaves:
            return out
        # per thread: the slice's shape, its constants, and which element byte each leaf byte is
        cols = [np.stack([res for _, _, res in reads], axis=1)]
        cols += [_value(m, r, ins)[S].astype(np.int64)[:, None] for r in consts]
        keys, fmts = [], []
        for r in leaves:
            isleaf = np.zeros(n, bool)
            for _, q, res in reads:
                if q == r:
                    isleaf |= res == LEAF
            t = np.where(isleaf[:, None], _leaf_tags(m, r, S), 0)
            v = m.regs[r][S]
            byts = np.stack([((v >> U64(8 * k)) & U64(0xFF)).astype(np.int64) for k in range(t.shape[1])], axis=1)
            cols.append(np.where(t == 0, byts, -1))                     # constant bytes
            cols.append(np.where(t != 0, TG.byte(t) + 8 * (TG.fmt(t) == TG.SEXT), -1))
            keys.append(np.where(t != 0, TG.key(t), 0))
            fmts.append(_leaf_formats(m, t))
        K = np.concatenate(keys, axis=1)                                  # [n, B] element keys (0: constant)
        F = np.concatenate(fmts, axis=1)
        B = K.shape[1]
        # variables: the distinct elements of each thread's leaves, numbered by first appearance
        first = np.argmax(K[:, :, None] == K[:, None, :], axis=2)
        isfirst = (first == np.arange(B)[None, :]) & (K != 0)
        rank = np.cumsum(isfirst, axis=1) - 1
        vid = np.where(K != 0, rank[np.arange(n)[:, None], first], -1)
        nvar = isfirst.sum(axis=1)
        vkey = np.zeros((n, max(int(nvar.max()), 1)), np.int64)
        vfmt = np.zeros_like(vkey)
        rr, cc = np.nonzero(isfirst)
        vkey[rr, rank[rr, cc]] = K[rr, cc]
        vfmt[rr, rank[rr, cc]] = F[rr, cc]
        sig = np.concatenate(cols + [vid, vfmt], axis=1)
        uniq, inv = np.unique(sig, axis=0, return_inverse=True)
        inv = inv.ravel()
        out = out.copy()
        for u in range(len(uniq)):
            su = (inv == u) & ok
            if not su.any():
                continue
            k0 = int(np.flatnonzero(su)[0])
            ck = (p, et, uniq[u].tobytes())
            if ck not in self.cache:
                self.cache[ck] = self._decide(ins, p, et, halves, int(S[k0]), nodes, leaves, k0, vid[k0], vfmt[k0],
                                              int(nvar[k0]))
            res = self.cache[ck]
            if res is None:
                continue
            proof, cex = res
            ths = S[su]
            src_iss = TG.issue(tg[ths]).max(axis=1)                       # issues the sources already carried
            for h in range(halves):
                hb = slice(h * eb, (h + 1) * eb)
                if proof[h] is None:
                    if cex[h] is not None:
                        i = self._witness(ins, p, int(ths[0]), h, cex[h])
                        out[ths, hb] = np.where(tg[ths, hb] != 0, TG.with_issue(
                            tg[ths, hb], np.maximum(src_iss, i)[:, None]), 0)
                    continue
                base = TG.with_issue(TG.with_fmt(TG.with_deriv(vkey[su, proof[h]], TG.CONV), TG.fmt_code(et)),
                                     src_iss)
                for b in range(eb):
                    out[ths, h * eb + b] = TG.with_byte(base, b)
                self.proved += len(ths)
        return out

    def _conv(self, et, name, bits, i):
        """cvt.rn.<et>.<name> of variable i over the lanes (every value of the variables)."""
        key = (et, name, tuple(bits), i)
        if key not in self._convs:
            lanes = np.arange(1 << sum(bits), dtype=np.int64)
            x = ((lanes >> sum(bits[:i])) & ((1 << bits[i]) - 1)).astype(U64)
            self._convs[key] = V.cvt(et, name, "rn", x) & V.mask(V.type_bits(et))
        return self._convs[key]

    def _decide(self, ins0, p, et, halves, t, nodes, leaves, k, vid, vfmt, nvar):
        """Run the slice of thread t (row k) over every value of its elements; per result element
        the variable it is the exact conversion of (or None), and a counterexample (or None)."""
        m = self.m
        from .execute import _HANDLERS
        from .parse import Unsupported
        names = [TG.fmt_name(int(f)) for f in vfmt[:nvar]]
        bits = [TG.fmt_bits(x) for x in names]
        if not nvar or 0 in bits or sum(bits) > MAX_BITS or any(b % 8 for b in bits):
            return None
        L = 1 << sum(bits)
        lanes = np.arange(L, dtype=np.int64)
        var, sh = [], 0
        for b in bits:
            var.append(((lanes >> sh) & ((1 << b) - 1)).astype(U64))
            sh += b
        leafval, col = {}, 0
        for r in leaves:
            tt = _leaf_tags(m, r, np.array([t]))[0]
            v = int(m.regs[r][t])
            acc = np.zeros(L, U64)
            for b in range(len(tt)):
                if tt[b] == 0:
                    byte = np.full(L, (v >> (8 * b)) & 0xFF, U64)
                else:
                    i = int(vid[col + b])
                    x = var[i]
                    if TG.fmt(tt[b]) == TG.SEXT:
                        byte = np.where((x >> U64(bits[i] - 1)) & U64(1), U64(0xFF), U64(0))
                    else:
                        byte = (x >> U64(8 * int(TG.byte(tt[b])))) & U64(0xFF)
                acc |= byte << U64(8 * b)
            leafval[r] = acc
            col += len(tt)
        lm = _Lanes(m, L)
        outs: dict[int, dict] = {}

        def ev(ni):
            if ni in outs:
                return
            N = nodes[ni]
            env = {}
            for r, res in N.reads:
                c = int(res[k])
                if c == FAIL:
                    raise _GiveUp(r)
                if c == CONST:
                    env[r] = np.full(L, _value(m, r, ins0)[t], dtype=bool if m.fn.regs.get(r) == 1 else U64)
                elif c == LEAF:
                    env[r] = leafval[r]
                else:
                    ev(c)
                    env[r] = outs[c][r]
            ins = m.instrs[N.i]
            lm.regs = env
            if ins.pred is not None:
                g = np.asarray(env[ins.pred], bool)
                if not (~g if ins.pred_neg else g).all():
                    raise _GiveUp("guard")            # whether it runs depends on the element
            _HANDLERS[ins.head](lm, N.i, ins, lm.exe)
            outs[ni] = lm.regs

        try:
            ev(0)
            res = outs[0][_first_dest(ins0)]
        except (_GiveUp, Unsupported, NotImplementedError, KeyError, ValueError, TypeError, IndexError):
            return None
        w = V.type_bits(et)
        try:
            conv = [self._conv(et, names[i], bits, i) for i in range(nvar)]
        except Exception:  # noqa: BLE001 - a conversion the evaluator does not define: no decision
            return None
        self.decided += 1
        proof, cex = [None] * halves, [None] * halves
        for h in range(halves):
            got = (res >> U64(h * w)) & V.mask(w)
            miss = [int((got != c).sum()) for c in conv]
            i = int(np.argmin(miss))
            if miss[i] == 0:
                proof[h] = i
                continue
            # the counterexample: against the element it is nearest to being the conversion of
            d = int(np.flatnonzero(got != conv[i])[0])
            cex[h] = (names[i], int(var[i][d]), int(got[d]), int(conv[i][d]), et,
                      [(names[j], int(var[j][d])) for j in range(nvar) if j != i])
        return proof, cex

    def _witness(self, ins, p, t, h, cex) -> int:
        name, x, got, want, et, allv = cex
        m = self.m

        def path():
            out = []
            for r in _sources(ins):
                out += [x for x in m.path_of(r, t) if x not in out]
            return sorted(out) + [(ins.line, ins.text)]
        return m.issue(
            (p, "exact", h), "wrong-type", ins, t, "",
            f"element {h} of the result is computed from a .{name} element but is not its .{et} conversion: "
            f"for the element value {_fmtv(name, x)} it is {got:#x} ({_fmtv(et, got)}), the exact conversion "
            f"is {want:#x} ({_fmtv(et, want)})"
            + (f" (the other elements of the slice: {', '.join(f'.{n} {_fmtv(n, v)}' for n, v in allv)})"
               if allv else "") + "; decided over every value of the element",
            f"the .{name} element converted to .{et} (cvt.rn.{et}.{name})", path)


def _value(m, r, ins):
    v = m.regs.get(r)
    if v is None:
        v = m.special(r, ins)
    return v if v is not None else np.zeros(m.T, U64)


def _leaf_tags(m, r, S):
    nb = (m.fn.regs[r] + 7) // 8
    tg = m.tags.get(r)
    return tg[S][:, :nb] if tg is not None else np.zeros((len(S), nb), np.int64)


def _leaf_formats(m, t):
    """The format of the element each leaf byte holds (a sign byte: its buffer's type)."""
    f = TG.fmt(t)
    sx = (f == TG.SEXT) & (t != 0)
    if sx.any():
        bt = np.array([0] + [TG.fmt_code(b.type) for b in m.spec.buffers], np.int64)
        f = np.where(sx, bt[np.clip(TG.buf(t), 0, len(bt) - 1)], f)
    return np.where(t != 0, f, 0)


def _first_dest(ins):
    d = ins.ops[0]
    if isinstance(d, Pair):
        return d.first.name
    if isinstance(d, Vec):
        return next(x.name for x in d.items if isinstance(x, Reg))
    return d.name


def _fmtv(t: str, bits: int) -> str:
    if TG.is_int(t):
        w = TG.fmt_bits(t)
        return str(bits - (1 << w) if t.startswith("s") and bits >> (w - 1) & 1 else bits)
    try:
        from ..numerics import to_float64
        return repr(float(to_float64(np.array([bits], np.uint64), t)[0]))
    except Exception:  # noqa: BLE001 - a format the evaluator does not decode
        return f"{bits:#x}"
