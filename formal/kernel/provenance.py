"""The data-path proof: provenance at every mma and at the output buffer.

At an mma, every product of every output element must pair ``A[m][k]`` with ``B[k][n]``
for the accumulator's (m, n), each k once per formation (an accumulator keeps a bitset of
the k's it has seen, one per formation: element x element, element x residual, ...).  The
mma's result is an *accumulator* tag; at the end the output buffer must hold, at the
address of (m, n), the accumulator of (m, n) with every k of the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import tags as TG
from .parse import Reg, Unsupported, Vec

_CLASS_NAMES = ["A*B", "A*B_residual", "A_residual*B", "A_residual*B_residual"]


def _decoder(b):
    """element index -> coordinates (in the buffer's shape), valid mask."""
    shape, strides = np.array(b.shape), np.array(b.strides)
    if (strides == 0).any():
        return None
    order = np.argsort(-strides, kind="stable")
    first = getattr(b, "elem_offset", 0)          # a view: element indices are its buffer's

    def dec(idx):
        idx = np.asarray(idx, dtype=np.int64) - first
        rest = idx.copy()
        coords = np.zeros(idx.shape + (len(shape),), dtype=np.int64)
        for d in order:
            coords[..., d] = rest // strides[d]
            rest = rest % strides[d]
        ok = (rest == 0) & (coords < shape).all(axis=-1) & (coords >= 0).all(axis=-1)
        return coords, ok
    return dec


@lru_cache(maxsize=None)
def _frag(form, operand):
    from .. import layout
    lay = layout.fragment(form, operand)
    if lay.products != 1:
        raise ValueError("several products per warp")
    en = lay.enumerate()
    return lay, en


@dataclass
class _Contract:
    c: object
    lhs: int
    rhs: int
    out: int
    addend: int | None
    M: int
    N: int
    K: int
    batch: int
    lhs_tag: int = 0                # the buffer whose memory (and tags) each operand's view looks at
    rhs_tag: int = 0
    add_tag: int | None = None
    out_tag: int = 0


class Provenance:
    def __init__(self, m):
        self.m = m
        sp = m.spec
        self.dec = {}
        for i, (b, _, _) in enumerate(m.buffers):      # buffers, then views
            self.dec[i + 1] = _decoder(b)

        def tag(name):                                   # tags carry the buffer a view looks at
            return m.buf_index[sp.base(name).name] + 1
        self.contracts = []
        for c in sp.contracts:
            li, ri, oi = (m.buf_index[x] + 1 for x in (c.lhs, c.rhs, c.out))
            ai = m.buf_index[c.addend] + 1 if c.addend else None
            lb, rb, ob = sp.buffer(c.lhs), sp.buffer(c.rhs), sp.buffer(c.out)
            lshape = tuple(lb.extra.get("logical_shape", lb.shape))
            ls = lshape[-2:] if not c.lhs_t else lshape[-2:][::-1]
            rs = rb.shape[-2:] if not c.rhs_t else rb.shape[-2:][::-1]
            if len(lb.shape) not in (2, 3) or len(rb.shape) != len(lb.shape) or len(ob.shape) != len(lb.shape):
                raise Unsupported(0, c.text, "contracts over rank-2 (or batched rank-3) buffers")
            if ls[1] != rs[0] or tuple(ob.shape[-2:]) != (ls[0], rs[1]):
                from .spec import SpecError
                raise SpecError(f"{sp.source}: contract {c.out} = {c.text}: shapes {list(ls)} @ {list(rs)} -> "
                                f"{list(ob.shape[-2:])} do not match")
            batch = lb.shape[0] if len(lb.shape) == 3 else 1
            self.contracts.append(_Contract(c, li, ri, oi, ai, ls[0], rs[1], ls[1], batch, tag(c.lhs), tag(c.rhs),
                                            tag(c.addend) if c.addend else None, tag(c.out)))
        self.nwords = max(((max((c.K for c in self.contracts), default=1)) + 63) // 64, 1)
        cap = 1024
        self.acc_m = np.full(cap, -1, np.int64)
        self.acc_n = np.full(cap, -1, np.int64)
        self.acc_b = np.full(cap, -1, np.int64)
        self.acc_c = np.full(cap, -1, np.int64)
        self.acc_line = np.zeros(cap, np.int64)
        self.acc_set = np.zeros(cap, np.int64)        # the line of the mma that fixed its (m, n)
        self._line = 0                                 # the mma being checked
        self.acc_t = np.zeros(cap, np.int64)          # a thread holding it after its last mma
        self.acc_regs = {}                             # mma line -> (a regs, b regs)
        self.acc_add = np.zeros(cap, bool)
        self.acc_issue = np.zeros(cap, np.int64)      # a deferred witness the accumulator carries
        self.example: dict[int, int] = {}              # deferred witness -> the accumulator it describes
        self.kbits = np.zeros((cap, 4, self.nwords), np.uint64)
        self.nacc = 0
        self.mmas = 0
        self.wgmmas = 0                                # wgmma.mma_async executions (counted in mmas too)
        self.wg_fast = 0                               # warpgroup products checked separably (_products_fast)
        self.wg_products_expected = 0
        self.fast = True
        self.products = 0
        self.permuted = 0
        self.formations = np.zeros(4, np.int64)
        self.derivs = {"A": np.zeros(4, np.int64), "B": np.zeros(4, np.int64)}
        self.wmma_maps: set[str] = set()
        self.lane_done: set[int] = set()
        self.lane_proofs: list[dict] = []
        self.lanes = True

    # --------------------------------------------------------------- accumulators
    def _alloc(self, n):
        need = self.nacc + n
        if need > len(self.acc_m):
            cap = max(need, 2 * len(self.acc_m))
            for k in ("acc_m", "acc_n", "acc_b", "acc_c", "acc_line", "acc_set", "acc_t"):
                a = getattr(self, k)
                na = np.full(cap, -1 if k not in ("acc_line", "acc_set", "acc_t") else 0, np.int64)
                na[:len(a)] = a
                setattr(self, k, na)
            na = np.zeros(cap, bool)
            na[:len(self.acc_add)] = self.acc_add
            self.acc_add = na
            ni = np.zeros(cap, np.int64)
            ni[:len(self.acc_issue)] = self.acc_issue
            self.acc_issue = ni
            kb = np.zeros((cap, 4, self.nwords), np.uint64)
            kb[:len(self.kbits)] = self.kbits
            self.kbits = kb
        ids = np.arange(self.nacc, need)
        self.nacc = need
        return ids

    # --------------------------------------------------------------- mma
    def _elements(self, form, operand, regs, vals, tids, frag=None, ins=None, p=-1, typ=None):
        """Tags [W, rows, cols] (first byte of each element), values, holder (lane, reg), the
        layout, and the deferred witness of each slot whose bytes are not one element encoded
        as ``typ`` (the type the instruction reads the operand as; 0 where fine)."""
        m = self.m
        lay, en = (frag, frag.enumerate()) if frag is not None else _frag(form, operand)
        if lay.elem_bits < 8:
            raise Unsupported(0, form.opcode, "sub-byte elements in check")
        W = tids.shape[0]
        nb = lay.reg_bits // 8
        T = np.zeros((W, tids.shape[1], len(regs), nb), np.int64)
        for j, r in enumerate(regs):
            tg = m.tags.get(r)
            if tg is not None:
                T[:, :, j, :] = tg[tids][:, :, :nb]
        # a warpgroup fragment's holder is its thread (0..127 of the warpgroup), a warp's its lane
        lane = en["thread"] if "thread" in en else en["lane"]
        reg, elem, row, col = en["reg"], en["elem"], en["row"], en["col"]
        cont = elem * lay.elem_bits
        byte0 = cont // 8
        tag = T[:, lane, reg, byte0]                                    # [W, P]
        ebytes = lay.elem_bits // 8
        v = vals.astype(np.uint64)[:, lane, reg] >> (cont + lay.shift).astype(np.uint64)
        v = v & np.uint64((1 << lay.value_bits) - 1)
        R, C = lay.rows, lay.cols
        tags = np.zeros((W, R, C), np.int64)
        value = np.zeros((W, R, C), np.uint64)
        iss = np.zeros((W, R, C), np.int64)
        hl = np.zeros((R, C), np.int64)
        hr = np.zeros((R, C), np.int64)
        tags[:, row, col] = tag
        value[:, row, col] = v
        hl[row, col] = lane
        hr[row, col] = reg
        if typ and tag.any():
            eb = np.stack([T[:, lane, reg, byte0 + b] for b in range(ebytes)], axis=-1)       # [W, P, bytes]
            bad, have = TG.read_check(eb.reshape(-1, ebytes), None, typ)
            bad = bad.reshape(W, -1)
            if bad.any():
                w, k = map(int, np.argwhere(bad)[0])
                t0 = int(tag[w, k])
                got = TG.fmt_name(int(have.reshape(W, -1)[w, k]))
                i = m.issue((p, "type", operand), "wrong-type", ins, int(tids[w, lane[k]]), regs[int(reg[k])],
                            lambda: f"operand {operand.upper()} element ({int(row[k])}, {int(col[k])}): "
                            f"{self._describe(t0)} is {_encoded(m, t0, got)}; the instruction reads it as .{typ}",
                            f"{operand.upper()} elements encoded as .{typ} (the instruction's type), or converted to it")
                sl = np.zeros((W, R, C), bool)
                sl[:, row, col] = bad
                iss[sl] = i
        return tags, value, iss, hl, hr, lay

    def _coords(self, t, bufid, transpose):
        dec = self.dec[bufid]
        co, ok = dec(TG.idx(t))
        if co.shape[-1] == 3:
            bch, r, c = co[..., 0], co[..., 1], co[..., 2]
        else:
            bch, r, c = np.zeros_like(co[..., 0]), co[..., 0], co[..., 1]
        b = self.m.buffers[bufid - 1][0]
        if b.extra.get("sparse") == "2:4" and len(b.shape) == 2:
            # compressed column c of row r is logical column 4 * (c // 2) + idx (E's nibble)
            meta = self._meta(b)
            rr, cc = np.clip(r, 0, meta.shape[0] - 1), np.clip(c // 2, 0, meta.shape[1] - 1)
            nib = meta[rr, cc].astype(np.int64)
            c = 4 * (c // 2) + ((nib >> (2 * (c % 2))) & 3)
        if transpose:
            r, c = c, r
        return bch, r, c, ok

    def _meta(self, b):
        if not hasattr(self, "_meta_cache"):
            self._meta_cache = {}
        if b.name not in self._meta_cache:
            self._meta_cache[b.name] = self.m.read_buffer(b.extra["metadata"])
        return self._meta_cache[b.name]

    def _zero(self, value, lay):
        # +0 or -0 in every float format; 0 for integers
        sign = np.uint64(1 << (lay.value_bits - 1))
        return (value & ~sign) == 0 if lay.value_bits > 1 else value == 0

    def mma(self, ins, p, form, tids, regs, a, b, c, e, sel, frags=None):
        m = self.m
        kidx = None
        if form.is_sparse:
            from ..metadata.storage import gather_terms
            try:
                _, kidx = gather_terms(form, a, e, sel)                   # [W, M, K/2] logical k per stored column
            except Exception as ex:  # noqa: BLE001 - illegal metadata / selector: undefined behaviour
                m.witness("undefined", ins, int(tids[0, 0]), ins.ops[4].name if hasattr(ins.ops[4], "name") else "",
                          f"sparse metadata / selector: {ex}", "legal metadata and selector (9.7.14.6)")
                return None
        self.mmas += 1
        fr = frags or {}
        At, Av, Ai, Al, Ar, La = self._elements(form, "a", regs["a"], a, tids, fr.get("a"), ins, p, form.atype)
        Bt, Bv, Bi, Bl, Br, Lb = self._elements(form, "b", regs["b"], b, tids, fr.get("b"), ins, p, form.btype)
        Ct, Cv, Ci, Cl, Cr, Lc = self._elements(form, "c", regs["c"], c, tids, fr.get("c"), ins, p, form.ctype)
        if frags:
            self.wmma_maps.update(f"{k}: {v.fmap.id} ({v.fmap.evidence})" for k, v in frags.items())
        dl = (fr["d"], fr["d"].enumerate()) if "d" in fr else _frag(form, "d")
        return self._accumulate(ins, p, form, tids, regs, (At, Av, Ai, Al, Ar, La), (Bt, Bv, Bi, Bl, Br, Lb),
                                (Ct, Cv, Ci, Cl, Cr, Lc), kidx, dl)

    def _accumulate(self, ins, p, form, tids, regs, opa, opb, opc, kidx, dl, fast=False):
        """The accumulators of an mma (or wgmma) and its products, given its operands' tags: A [W, M, K],
        B [W, K, N], C [W, M, N] (tags, values, deferred witnesses, holders, layout); returns d's tags
        per register.  ``fast``: try the separable check per warp(group) first (_products_fast)."""
        m = self.m
        At, Av, Ai, Al, Ar, La = opa
        Bt, Bv, Bi, Bl, Br, Lb = opb
        Ct, Cv, Ci, Cl, Cr, Lc = opc
        W, M, K = At.shape
        At, a_res = self._chained(ins, p, tids, At, Al, Ar, regs["a"], rows=True)
        Bt, b_res = self._chained(ins, p, tids, Bt, Bl, Br, regs["b"], rows=False)
        Ai = np.maximum(Ai, TG.issue(At))
        Bi = np.maximum(Bi, TG.issue(Bt))
        Ci = np.maximum(Ci, TG.issue(Ct))
        con = self._pick(At, Bt, Ct)
        if con is None:
            raise Unsupported(ins.line, ins.text, "the spec has no [contract] to check the mma against")
        # accumulator ids
        ckind = TG.kind(Ct)
        is_acc = ckind == TG.ACC
        # a chain through one buffer (C1 = A @ B + C; C2 = A2 @ B2 + C1): an accumulator of the contract
        # whose output is this contract's addend starts a new accumulator from that element
        prev = self._upstream(con)
        prev_bad = None
        from_prev = np.zeros_like(is_acc)
        if prev is not None and is_acc.any():
            cid = np.where(is_acc, TG.idx(Ct), 0)
            from_prev = is_acc & (self.acc_c[cid] == self.contracts.index(prev))
            if from_prev.any():
                full = self._complete(cid[from_prev], prev.K)
                if (~full).any():
                    bad = np.zeros_like(from_prev)
                    bad[from_prev] = ~full
                    prev_bad = (bad, self._wit_op("missing-product", ins, p, tids, Ct, bad, Cl, Cr, regs["c"],
                                                  f"the addend {con.c.addend} before all its products ({prev.c.text})",
                                                  f"{con.c.addend} complete before {con.c.text} adds it"))
                prev_ids = cid
                is_acc = is_acc & ~from_prev
        inplace = regs["d"] == regs["c"]
        ids = np.where(is_acc, TG.idx(Ct), -1)
        new = ~is_acc if inplace else np.ones_like(is_acc)
        nn = int(new.sum())
        if nn:
            fresh = self._alloc(nn)
            old = ids[new]
            ids[new] = fresh
            had = old >= 0
            self.acc_issue[fresh] = 0
            if had.any():                        # copy: d is a new accumulator built on c's
                for k in ("acc_m", "acc_n", "acc_b", "acc_c", "acc_set", "acc_add", "acc_issue"):
                    arr = getattr(self, k)
                    arr[fresh[had]] = arr[old[had]]
                self.kbits[fresh[had]] = self.kbits[old[had]]
        if from_prev.any():
            fi, oi = ids[from_prev], prev_ids[from_prev]
            self.acc_m[fi], self.acc_n[fi], self.acc_b[fi] = self.acc_m[oi], self.acc_n[oi], self.acc_b[oi]
            self.acc_set[fi] = self.acc_set[oi]
            self.acc_add[fi] = True
            self.kbits[fi] = 0
            self.acc_issue[fi] = self.acc_issue[oi]
            if prev_bad is not None:
                self._taint(ids[prev_bad[0]], prev_bad[1])
        # a fresh accumulator starts from c: zero, or the addend's element
        start = new & ~is_acc & ~from_prev
        if start.any():
            celem = start & (ckind == TG.ELEM)
            if celem.any():
                if prev is not None:             # the addend is a result: memory still holding the input is stale
                    self._taint(ids[celem], self._wit_op(
                        "wrong-element", ins, p, tids, Ct, celem, Cl, Cr, regs["c"],
                        "the accumulator starts from an input element",
                        f"{con.c.addend}, the result of {prev.c.out} = {prev.c.text} (contract {con.c.text})"))
                    celem = celem & False
                elif con.addend is None or (TG.buf(Ct[celem]) != con.add_tag).any():
                    bad = celem if con.addend is None else celem & (TG.buf(Ct) != con.add_tag)
                    self._taint(ids[bad], self._wit_op("wrong-element", ins, p, tids, Ct, bad, Cl, Cr, regs["c"],
                                                       "an input element in the accumulator",
                                                       f"zero (contract {con.c.text})"))
                    celem = celem & ~bad
                if celem.any():
                    bch, r, cl, ok = self._coords(Ct[celem], con.addend, False)
                    fi = ids[celem]
                    self.acc_m[fi], self.acc_n[fi], self.acc_b[fi] = r, cl, bch
                    self.acc_add[fi] = True
            cconst = start & (ckind == TG.NONE) & ~self._zero(Cv, Lc)
            if cconst.any():
                self._taint(ids[cconst], self._wit_op("wrong-element", ins, p, tids, Ct, cconst, Cl, Cr, regs["c"],
                                                      "a non-zero constant in the accumulator",
                                                      "zero or the contract's addend", values=Cv, lay=Lc))
            cg = start & (ckind == TG.GARBLED)
            if cg.any():
                self._taint(ids[cg], self._wit_op("wrong-element", ins, p, tids, Ct, cg, Cl, Cr, regs["c"],
                                                  "a value computed from several elements in the accumulator",
                                                  "zero or an accumulator"))
        if Ci.any():                             # c read as another type than it holds
            self._taint_max(ids, Ci)
        self.acc_line[ids.ravel()] = ins.line
        self.acc_t[ids] = tids[:, Cl]
        self.acc_regs[ins.line] = (_reg_names(regs["a"]), _reg_names(regs["b"]))
        self.acc_c[ids.ravel()] = self.contracts.index(con)
        rest = np.ones(W, bool)
        self._line = ins.line
        if fast:
            rest = ~self._products_fast(con, ids, At, Ai, Bt, Bi, a_res, b_res)
        if rest.all():
            self._products(ins, p, form, tids, regs, con, ids, At, Av, Ai, Al, Ar, La, Bt, Bv, Bi, Bl, Br, Lb,
                           a_res, b_res, kidx)
        elif rest.any():
            w = np.flatnonzero(rest)
            self._products(ins, p, form, tids[w], regs, con, ids[w], At[w], Av[w], Ai[w], Al, Ar, La, Bt[w], Bv[w],
                           Bi[w], Bl, Br, Lb, a_res[w], b_res[w], None if kidx is None else kidx[w])
        # d's tags: the accumulator ids at the d fragment, encoded as .dtype
        lay, en = dl
        eb = lay.elem_bits // 8
        dfmt = TG.fmt_code(form.dtype)
        out = []
        T = m.T
        holder = en["thread"] if "thread" in en else en["lane"]
        for j in range(len(regs["d"])):
            tg = np.zeros((T, lay.reg_bits // 8), np.int64)
            sel_ = en["reg"] == j
            ln, el, rw, cl = holder[sel_], en["elem"][sel_], en["row"][sel_], en["col"][sel_]
            for b in range(eb):
                t_ = TG.make(TG.ACC, 0, ids[:, rw, cl], b, fmt=dfmt)             # [W, P]
                tg[tids[:, ln], el * eb + b] = t_
            out.append(tg)
        return out

    def _products(self, ins, p, form, tids, regs, con, ids, At, Av, Ai, Al, Ar, La, Bt, Bv, Bi, Bl, Br, Lb,
                  a_res, b_res, kidx):
        """Every product of the mma at once, axes (warp, m, n, k slot): each must pair
        lhs[m][k] with rhs[k][n] for the accumulator's (m, n), each k once per formation."""
        W, M, K = At.shape
        N = Bt.shape[2]
        Kfull = Bt.shape[1]
        # every product of the mma at once: axes (warp, m, n, k slot)
        A4 = At[:, :, None, :]
        Az = self._zero(Av, La)[:, :, None, :]
        Ai4 = Ai[:, :, None, :]
        abch, am, ak, aok = (x[:, :, None, :] for x in self._coords(At, con.lhs, con.c.lhs_t))
        if kidx is None:
            B4 = np.swapaxes(Bt, 1, 2)[:, None, :, :]
            Bv4 = np.swapaxes(Bv, 1, 2)[:, None, :, :]
            Bi4 = np.swapaxes(Bi, 1, 2)[:, None, :, :]
            bbch, bk, bn, bok = (np.swapaxes(x, 1, 2)[:, None, :, :] for x in self._coords(Bt, con.rhs, con.c.rhs_t))
            brows = np.broadcast_to(np.arange(K), (W, M, N, K))
        else:                                   # stored column kk of row m meets B row kidx[w, m, kk]
            wi, ni = np.arange(W)[:, None, None, None], np.arange(N)[None, None, :, None]
            ki = kidx[:, :, None, :]
            B4, Bv4, Bi4 = Bt[wi, ki, ni], Bv[wi, ki, ni], Bi[wi, ki, ni]
            bbch, bk, bn, bok = (x[wi, ki, ni] for x in self._coords(Bt, con.rhs, con.c.rhs_t))
            brows = np.broadcast_to(ki, (W, M, N, K))
        Bz = self._zero(Bv4, Lb)
        shape = (W, M, N, K)
        ka, kb_ = TG.kind(A4), TG.kind(B4)
        # a product with a constant factor is no product when it is exactly zero whatever the data:
        # an integer zero; a float zero times a finite constant (padding x padding).  A float zero
        # times an element is not: 0 x Inf is NaN
        ca, cb = ka == TG.NONE, kb_ == TG.NONE
        za, zb = ca & Az, cb & Bz
        if _is_int(form.atype) and _is_int(form.btype):
            neutral = za | zb
        else:
            neutral = np.zeros(shape, bool)
            if za.any() and cb.any():
                neutral = neutral | (za & cb & self._finite(Bv4, form.btype))
            if zb.any() and ca.any():
                neutral = neutral | (zb & ca & self._finite(Av, form.atype)[:, :, None, :])
        act = ~np.broadcast_to(neutral, shape)
        # an element of the operand's buffer outside its view (another slice, padding) is not the
        # operand's; an element changed by arithmetic is not the element
        good_a = np.broadcast_to((ka == TG.ELEM) & (TG.buf(A4) == con.lhs_tag) & aok & (TG.deriv(A4) != TG.ARITH), shape)
        good_b = np.broadcast_to((kb_ == TG.ELEM) & (TG.buf(B4) == con.rhs_tag) & bok & (TG.deriv(B4) != TG.ARITH),
                                 shape)
        # an operand that is an earlier contract's result must be that result, not stale memory
        if self._producer(con, con.c.lhs) is not None:
            good_a = good_a & np.broadcast_to(a_res[:, :, None, :], shape)
        if self._producer(con, con.c.rhs) is not None:
            b_r = np.swapaxes(b_res, 1, 2)[:, None, :, :] if kidx is None else b_res[wi, ki, ni]
            good_b = good_b & np.broadcast_to(b_r, shape)
        A4, B4 = np.broadcast_to(A4, shape), np.broadcast_to(B4, shape)
        ids4 = np.broadcast_to(ids[..., None], shape)

        def first(mask):
            w, i, j, kk = map(int, np.argwhere(mask)[0])
            return kk, int(brows[w, i, j, kk])

        # operand issues (a value read as another type, or carrying one) go to the accumulators
        # of the products they are in
        carried = None
        if Ai4.any() or Bi4.any():
            a_, b_ = np.broadcast_to(Ai4, shape), np.broadcast_to(Bi4, shape)
            carried = np.where(act, np.where(a_ > 0, a_, b_), 0)         # A's witness first
        if carried is not None and carried.any():
            big = np.where(carried > 0, carried, np.iinfo(np.int64).max).min(axis=-1)
            self._taint_max(ids, np.where(big == np.iinfo(np.int64).max, 0, big))
        bad_a = act & ~good_a
        if bad_a.any():
            kk, _ = first(bad_a)
            i = self._wit_prod("wrong-element", ins, p, tids, A4[..., kk], bad_a[..., kk], Al[:, kk], Ar[:, kk],
                               regs["a"], "A", kk, con, values=Av[:, :, None, kk], lay=La)
            self._example(i, ids, bad_a[..., kk])
            self._taint(ids[bad_a.any(axis=-1)], i)
        bad_b = act & good_a & ~good_b
        if bad_b.any():
            kk, br = first(bad_b)
            i = self._wit_prod("wrong-element", ins, p, tids, B4[..., kk], bad_b[..., kk], Bl[br], Br[br], regs["b"],
                               "B", kk, con, row_axis=False, values=Bv4[..., kk], lay=Lb)
            self._example(i, ids, bad_b[..., kk])
            self._taint(ids[bad_b.any(axis=-1)], i)
        ok = act & good_a & good_b
        if ok.any():
            am4, ak4, ab4 = (np.broadcast_to(x, shape) for x in (am, ak, abch))
            bk4, bn4, bb4 = (np.broadcast_to(x, shape) for x in (bk, bn, bbch))
            kmis = ok & ((ak4 != bk4) | (ab4 != bb4))
            if kmis.any():
                kk, br = first(kmis)
                w0, i0, j0 = map(int, np.argwhere(kmis[..., kk])[0])
                done = int(sum(bin(int(x)).count("1") for x in self.kbits[ids[w0, i0, j0], 0]))
                i = self._wit_k(ins, p, tids, A4[..., kk], B4[..., kk], kmis[..., kk], (Al[:, kk], Ar[:, kk], regs["a"]),
                                (Bl[br], Br[br], regs["b"]), kk, K, con, am4[..., kk], ak4[..., kk], bk4[..., kk],
                                bn4[..., kk], expected=done + kk)
                self._example(i, ids, kmis[..., kk])
                self._taint(ids[kmis.any(axis=-1)], i)
            ok &= ~kmis
            unset = ok & (self.acc_m[ids4] < 0)
            if unset.any():
                self.acc_m[ids4[unset]] = am4[unset]
                self.acc_n[ids4[unset]] = bn4[unset]
                self.acc_set[ids4[unset]] = self._line
                self.acc_b[ids4[unset]] = ab4[unset]
            wrong_mn = ok & ((self.acc_m[ids4] != am4) | (self.acc_n[ids4] != bn4) | (self.acc_b[ids4] != ab4))
            if wrong_mn.any():
                kk, br = first(wrong_mn)
                w0, i0, j0 = map(int, np.argwhere(wrong_mn[..., kk])[0])
                # the row agrees with the accumulator's: the column, which B brings, is the wrong one
                col = bool(self.acc_m[ids4[w0, i0, j0, kk]] == am4[w0, i0, j0, kk]
                           and self.acc_b[ids4[w0, i0, j0, kk]] == ab4[w0, i0, j0, kk])
                hl, hr, rg = (Bl[br], Br[br], regs["b"]) if col else (Al[:, kk], Ar[:, kk], regs["a"])
                i = self._wit_mn(ins, p, tids, A4[..., kk], B4[..., kk], wrong_mn[..., kk], hl, hr,
                                 rg, kk, con, am4[..., kk], bn4[..., kk], ids, col=col)
                self._example(i, ids, wrong_mn[..., kk])
                self._taint(ids[wrong_mn.any(axis=-1)], i)
            ok &= ~wrong_mn
        if ok.any():
            cls = 2 * (TG.deriv(A4) == TG.RESID) + (TG.deriv(B4) == TG.RESID)
            word = ak4 >> 6
            bit = (ak4 & 63).astype(np.uint64)
            sel_ids, sel_cls, sel_w, sel_b = ids4[ok], cls[ok], word[ok], bit[ok]
            dup = np.zeros(shape, bool)
            dup[ok] = ((self.kbits[sel_ids, sel_cls, sel_w] >> sel_b) & np.uint64(1)) == 1
            # the same k twice inside this mma
            key = np.sort(np.where(ok, ak4 * 4 + cls, -1 - np.arange(K)), axis=-1)
            twice = ((key[..., 1:] == key[..., :-1]) & (key[..., 1:] >= 0)).any(axis=-1)
            if twice.any():
                w, i, j = map(int, np.argwhere(twice)[0])
                kd = key[w, i, j][1:][(key[w, i, j][1:] == key[w, i, j][:-1])][0]
                dup[w, i, j] |= ok[w, i, j] & (ak4[w, i, j] * 4 + cls[w, i, j] == kd)
            if dup.any():
                kk, _ = first(dup)
                i = self._wit_dup(ins, p, tids, A4[..., kk], dup[..., kk], Al[:, kk], Ar[:, kk], regs["a"], con,
                                  am4[..., kk], ak4[..., kk], bn4[..., kk], cls[..., kk])
                self._example(i, ids, dup[..., kk])
                self._taint(ids[dup.any(axis=-1)], i)
            np.bitwise_or.at(self.kbits, (sel_ids, sel_cls, sel_w), np.uint64(1) << sel_b)
            self.products += int(ok.sum())
            slot = np.broadcast_to(np.arange(K), shape) if kidx is None else brows
            self.permuted += int((ok & ((ak4 % Kfull) != slot)).sum())
            self.formations += np.bincount(cls[ok].ravel(), minlength=4)
            self.derivs["A"] += np.bincount(TG.deriv(A4[ok]).ravel(), minlength=4)[:4]
            self.derivs["B"] += np.bincount(TG.deriv(B4[ok]).ravel(), minlength=4)[:4]

    def _pick(self, At, Bt, Ct):
        """The contract an mma works for: its A and B elements come from the contract's lhs and rhs
        (as buffers); among several (a chain reusing operands), the one the accumulator c belongs
        to, or the next one in the chain once c's contract is complete."""
        if not self.contracts:
            return None

        def major(T):
            b = TG.buf(T[TG.kind(T) == TG.ELEM])
            return int(np.bincount(b).argmax()) if b.size else None
        ab, bb = major(At), major(Bt)
        cands = [c for c in self.contracts if ab in (None, c.lhs_tag) and bb in (None, c.rhs_tag)] or \
            [c for c in self.contracts if ab in (None, c.lhs_tag)] or self.contracts[:1]
        if len(cands) == 1:
            return cands[0]
        acc = TG.kind(Ct) == TG.ACC
        if acc.any():
            a = TG.idx(Ct[acc])
            ci = int(np.bincount(self.acc_c[a].clip(0)).argmax())
            x = self.contracts[ci]
            nxt = [c for c in cands if self._upstream(c) is x]
            if nxt and self._complete(a[:1], x.K).all():
                return nxt[0]
            if x in cands:
                return x
        cb = major(Ct)
        if cb is not None:
            for c in cands:
                if c.add_tag == cb:
                    return c
        first = [c for c in cands if self._upstream(c) is None]
        return (first or cands)[0]

    def _producer(self, con, name):
        """The earlier contract whose output ``name`` is."""
        k = self.contracts.index(con)
        return next((x for x in reversed(self.contracts[:k]) if x.c.out == name), None)

    def _registers_only(self, con) -> bool:
        """A chained contract's output that no parameter or tensor map reaches (attention's S, converted
        in registers and fed to the next product): it is never in memory."""
        b = self.m.spec.buffer(con.c.out)
        sp = self.m.spec
        return (con.c.out in sp.extra.get("chained", []) and not getattr(b, "param", None)
                and not any(t.buffer == b.name for t in sp.tensormaps))

    @staticmethod
    def _reads(y, x) -> bool:
        """Contract ``y`` reads ``x``'s output (as an operand or as its addend)."""
        return x.c.out in (y.c.lhs, y.c.rhs, y.c.addend)

    def _upstream(self, con):
        """The earlier contract whose output (the same memory, the same layout) is ``con``'s addend."""
        if con.addend is None:
            return None
        k = self.contracts.index(con)
        for x in reversed(self.contracts[:k]):
            if x.out == con.addend:          # by name: "C" is the input, "C1" the first step's result
                return x
        return None

    def _chained(self, ins, p, tids, T, hl, hr, regs, rows):
        """An operand that is another contract's accumulator (attention: S = Q @ K.T feeds
        O = S @ V): complete accumulators become that contract's output elements (in the
        format the kernel converted them to), carrying the accumulator's deferred witness."""
        acc = TG.kind(T) == TG.ACC
        if not acc.any():
            return T, acc
        ids = np.where(acc, TG.idx(T), 0)
        T = T.copy()
        cidx = self.acc_c[ids]
        for ci, con in enumerate(self.contracts):
            sel = acc & (cidx == ci)
            if not sel.any():
                continue
            b = self.m.buffers[con.out - 1][0]
            st = b.strides
            a = ids[sel]
            if len(b.shape) == 3:
                idx = self.acc_b[a] * st[0] + self.acc_m[a] * st[1] + self.acc_n[a] * st[2]
            else:
                idx = self.acc_m[a] * st[0] + self.acc_n[a] * st[1]
            iss = np.maximum(self.acc_issue[a], TG.issue(T[sel]))
            full = self._complete(a, con.K)
            if (~full).any():
                k = int(np.flatnonzero(~full)[0])
                w, r, c = (int(x[k]) for x in np.nonzero(sel))
                pos = r if rows else c
                t, reg, path, note = self._holder(tids, w, hl[pos] if hl.ndim == 1 else hl[r, c],
                                                  hr[pos] if hr.ndim == 1 else hr[r, c], regs, ins)
                i = self.m.issue((p, "chained", rows), "missing-product", ins, t, reg,
                                 f"the accumulator of {b.name}[{self.acc_m[a[k]]}][{self.acc_n[a[k]]}] before all its "
                                 f"products ({self._count(a[k])} of {con.K}){note}",
                                 f"{b.name} complete ({con.c.text}) before it feeds this mma", path=path)
                iss = np.where(~full & (iss == 0), i, iss)
            T[sel] = TG.with_issue(TG.make(TG.ELEM, con.out_tag, idx + b.elem_offset, TG.byte(T[sel]), TG.CONV, TG.fmt(T[sel])), iss)
        return T, acc

    def _required(self, con, rows):
        """Bitsets of the k's output row m needs: all K, or for a structured-sparse lhs the
        columns its metadata names (the others are zeros by construction)."""
        full = self._fullwords(con.K)
        b = self.m.buffers[con.lhs - 1][0]
        out = np.broadcast_to(full, rows.shape + (self.nwords,)).copy()
        if b.extra.get("sparse") == "2:4" and not con.c.lhs_t and len(b.shape) == 2:
            meta = self._meta(b).astype(np.int64)                     # [M, K/4]
            req = np.zeros((meta.shape[0], self.nwords), np.uint64)
            for ch in range(meta.shape[1]):
                for j in range(2):
                    k = 4 * ch + ((meta[:, ch] >> (2 * j)) & 3)
                    np.bitwise_or.at(req, (np.arange(meta.shape[0]), k >> 6), np.uint64(1) << (k & 63).astype(np.uint64))
            out = req[np.clip(rows, 0, meta.shape[0] - 1)]
        return out

    def _fullwords(self, K):
        fullw = np.zeros(self.nwords, np.uint64)
        for k in range(K):
            fullw[k >> 6] |= np.uint64(1) << np.uint64(k & 63)
        return fullw

    def _complete(self, ids, K):
        kb = self.kbits[ids]
        fullw = self._fullwords(K)
        have = (kb != 0).any(axis=-1)
        isfull = (kb == fullw).all(axis=-1)
        return have[..., 0] & isfull[..., 0] & (~have[..., 1:] | isfull[..., 1:]).all(axis=-1)

    def _count(self, a):
        return int(sum(bin(int(x)).count("1") for x in self.kbits[a, 0]))

    def merge_add(self, ins, exe, ts, tg, nb):
        """add.f32 of two accumulators of the same (m, n) -> one accumulator with both k sets
        (a k in both is a duplicate product); accumulator + the addend's element -> the
        accumulator with its addend."""
        m = self.m
        if ts[0] is None or ts[1] is None:
            return tg
        a0, b0 = ts[0][:, 0], ts[1][:, 0]
        ka, kb = TG.kind(a0), TG.kind(b0)
        both = exe & (ka == TG.ACC) & (kb == TG.ACC) & (TG.idx(a0) != TG.idx(b0))   # x + x is arithmetic on x
        add_c = exe & (((ka == TG.ACC) & (kb == TG.ELEM)) | ((ka == TG.ELEM) & (kb == TG.ACC)))
        if not (both.any() or add_c.any()):
            return tg
        out = tg.copy()
        if both.any():
            both, out = self._add_upstream(ins, both, a0, b0, out, nb)
        if both.any():
            t = np.flatnonzero(both)
            ia, ib = TG.idx(a0[t]), TG.idx(b0[t])
            same = (self.acc_m[ia] == self.acc_m[ib]) & (self.acc_n[ia] == self.acc_n[ib]) & \
                (self.acc_b[ia] == self.acc_b[ib])
            iss = np.maximum(self.acc_issue[ia], self.acc_issue[ib])
            iss = np.maximum(iss, np.maximum(TG.issue(a0[t]), TG.issue(b0[t])))
            if (~same).any():
                k = int(np.flatnonzero(~same)[0])
                i = m.issue((ins.line, "merge-mn"), "wrong-element", ins, t[k], ins.ops[1].name,
                            f"adds the accumulator of ({self.acc_m[ia[k]]}, {self.acc_n[ia[k]]}) to that of "
                            f"({self.acc_m[ib[k]]}, {self.acc_n[ib[k]]})", "partial sums of the same output element")
                iss = np.where(~same & (iss == 0), i, iss)
            dup = ((self.kbits[ia] & self.kbits[ib]) != 0).any(axis=(1, 2))
            if dup.any():
                k = int(np.flatnonzero(dup)[0])
                i = m.issue((ins.line, "merge-dup"), "duplicate-product", ins, t[k], ins.ops[1].name,
                            f"both partial sums of ({self.acc_m[ia[k]]}, {self.acc_n[ia[k]]}) hold some product",
                            "each k once")
                iss = np.where(dup & (iss == 0), i, iss)
            new = self._alloc(len(t))
            self.acc_issue[new] = iss
            for key in ("acc_m", "acc_n", "acc_b", "acc_c"):
                arr = getattr(self, key)
                arr[new] = arr[ia]
            self.acc_add[new] = self.acc_add[ia] | self.acc_add[ib]
            self.kbits[new] = self.kbits[ia] | self.kbits[ib]
            self.acc_line[new] = ins.line
            out[t] = TG.make(TG.ACC, 0, new[:, None], np.arange(nb)[None, :] % 8, fmt=TG.fmt(a0[t])[:, None])
        if add_c.any():
            t = np.flatnonzero(add_c)
            acc_t = np.where(ka[t] == TG.ACC, a0[t], b0[t])
            el_t = np.where(ka[t] == TG.ACC, b0[t], a0[t])
            ia = TG.idx(acc_t)
            cons = [c for c in self.contracts if c.addend is not None and self._upstream(c) is None]
            ok = np.zeros(len(t), bool)
            for con in cons:
                sel = TG.buf(el_t) == con.add_tag
                if sel.any():
                    bch, r, c, okc = self._coords(el_t[sel], con.addend, False)
                    good = okc & (r == self.acc_m[ia[sel]]) & (c == self.acc_n[ia[sel]])
                    ok[np.flatnonzero(sel)[good]] = True
            if (~ok).any():
                k = int(np.flatnonzero(~ok)[0])
                i = m.issue((ins.line, "merge-addend"), "wrong-element", ins, t[k], ins.ops[1].name,
                            f"adds {self._describe(el_t[k])} to the accumulator of ({self.acc_m[ia[k]]}, "
                            f"{self.acc_n[ia[k]]})", "the contract's addend at the accumulator's (m, n)")
                out[t[~ok]] = TG.with_issue(out[t[~ok]], i)
            acc_f = TG.fmt(acc_t[ok])
            iss = np.maximum(self.acc_issue[ia[ok]], np.maximum(TG.issue(acc_t[ok]), TG.issue(el_t[ok])))
            tt, ia = t[ok], ia[ok]
            if tt.size:
                new = self._alloc(len(tt))
                self.acc_issue[new] = iss
                for key in ("acc_m", "acc_n", "acc_b", "acc_c"):
                    arr = getattr(self, key)
                    arr[new] = arr[ia]
                self.acc_add[new] = True
                self.kbits[new] = self.kbits[ia]
                self.acc_line[new] = ins.line
                out[tt] = TG.make(TG.ACC, 0, new[:, None], np.arange(nb)[None, :] % 8, fmt=acc_f[:, None])
        return out

    def _add_upstream(self, ins, both, a0, b0, out, nb):
        """acc + acc where one is a chain step's accumulator and the other the complete result of the
        step before it (D = A1 @ B1, then D + C1 with C1 = A0 @ B0 + C): the later step with its addend."""
        t = np.flatnonzero(both)
        ia, ib = TG.idx(a0[t]), TG.idx(b0[t])
        ca, cb = self.acc_c[ia], self.acc_c[ib]
        ups = {self.contracts.index(c): self.contracts.index(self._upstream(c)) for c in self.contracts
               if self._upstream(c) is not None}
        a_down = np.array([ups.get(int(x)) == int(y) for x, y in zip(ca, cb)], bool)
        b_down = np.array([ups.get(int(y)) == int(x) for x, y in zip(ca, cb)], bool)
        sel = a_down | b_down
        if not sel.any():
            return both, out
        down = np.where(a_down, ia, ib)[sel]
        up = np.where(a_down, ib, ia)[sel]
        tt = t[sel]
        con_up = [self.contracts[int(c)] for c in self.acc_c[up]]
        full = np.array([self._complete(np.array([u]), c.K)[0] for u, c in zip(up, con_up)], bool)
        same = (self.acc_m[down] == self.acc_m[up]) & (self.acc_n[down] == self.acc_n[up]) & \
            (self.acc_b[down] == self.acc_b[up])
        bad = ~full | ~same | self.acc_add[down]
        iss = np.maximum(self.acc_issue[down], self.acc_issue[up])
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            i = self.m.issue((ins.line, "upstream"), "wrong-element" if same[k] else "wrong-address", ins, tt[k],
                             ins.ops[1].name,
                             f"adds the accumulator of ({self.acc_m[up[k]]}, {self.acc_n[up[k]]}) of {con_up[k].c.out} "
                             f"({self._count(up[k])} of {con_up[k].K} products) to that of ({self.acc_m[down[k]]}, "
                             f"{self.acc_n[down[k]]})" + (" which already has its addend" if self.acc_add[down[k]] else ""),
                             f"{con_up[k].c.out} complete, added once at the same element")
            iss = np.where(bad & (iss == 0), i, iss)
        new = self._alloc(len(tt))
        self.acc_issue[new] = iss
        for key in ("acc_m", "acc_n", "acc_b", "acc_c"):
            arr = getattr(self, key)
            arr[new] = arr[down]
        self.acc_add[new] = True
        self.kbits[new] = self.kbits[down]
        self.acc_line[new] = ins.line
        out[tt] = TG.make(TG.ACC, 0, new[:, None], np.arange(nb)[None, :] % 8, fmt=TG.fmt(a0[tt])[:, None])
        both = both.copy()
        both[tt] = False
        return both, out

    # --------------------------------------------------------------- witnesses
    def _example(self, i, ids, bad):
        """Deferred witness i describes the product of the first accumulator of ``bad`` [W, M, N]."""
        if i not in self.example:
            self.example[i] = int(ids[tuple(np.argwhere(bad)[0])])

    def _taint(self, ids, i):
        """Accumulators ``ids`` carry deferred witness i (the first one they meet stays)."""
        ids = np.asarray(ids).ravel()
        cur = self.acc_issue[ids]
        self.acc_issue[ids] = np.where(cur == 0, i, cur)

    def _taint_max(self, ids, iss):
        sel = np.asarray(iss) > 0
        if sel.any():
            self._taint_each(np.asarray(ids)[sel], np.asarray(iss)[sel])

    def _taint_each(self, ids, iss):
        cur = self.acc_issue[ids]
        self.acc_issue[ids] = np.where(cur == 0, iss, cur)

    def _finite(self, value, typ):
        """Finite values of a float type (constants: padding); integers are always finite."""
        from ..numerics.formats import get_format, to_float64
        if not typ or _is_int(typ):
            return np.ones(np.shape(value), bool)
        f = get_format("f32" if typ == "tf32" else typ)
        v = np.asarray(value, np.uint64)
        with np.errstate(all="ignore"):
            return np.isfinite(np.asarray(to_float64(v.ravel(), f), np.float64)).reshape(v.shape)

    def _describe(self, t, con=None, value=None, lay=None):
        t = int(t)
        k = int(TG.kind(t))
        if k == TG.NONE:
            if value is not None and lay is not None:
                return f"the constant {int(value):#0{2 + (lay.value_bits + 3) // 4}x} (not loaded from any buffer)"
            return "a constant (not loaded from any buffer)"
        f = TG.fmt_name(int(TG.fmt(t)))
        if k == TG.ACC or int(TG.buf(t)) == 0:
            i = int(TG.idx(t))
            s = f"accumulator of ({self.acc_m[i]}, {self.acc_n[i]})" if 0 <= i < len(self.acc_m) else "an accumulator"
            return ("a value mixing several elements, first the " + s) if k == TG.GARBLED else s
        bi = int(TG.buf(t))
        if bi not in self.dec or bi > len(self.m.buffers):
            return "a value of an unknown element"
        b = self.m.buffers[bi - 1][0]
        dec = self.dec[bi]
        co, ok = dec(np.array([TG.idx(t)])) if dec is not None else (None, [False])
        d = int(TG.deriv(t))
        s = f"{b.name}[{']['.join(str(int(x)) for x in co[0])}]" if ok[0] else f"{b.name} element #{int(TG.idx(t))}"
        if d:
            s += f" ({TG.DERIV_NAMES[d]}" + (f" to .{f}" if d == TG.CONV and f else "") + ")"
        if k == TG.GARBLED:
            s = "a value mixing several elements, first " + s
        return s

    def _holder(self, tids, w, lane, reg, regs, ins=None):
        """Who holds operand slot (lane, reg) of warp(group) w: (thread, register, path or None for the
        register's own, a note for the text).  A shared-memory operand (:class:`_Smem`) names its
        descriptor register and the shared byte, the path through the descriptor and the store."""
        if isinstance(regs, _Smem):
            return regs.holder(self.m, tids, int(w), int(lane), ins)
        return int(tids[w, lane]), regs[int(reg)], None, ""

    def _wit_op(self, kind, ins, p, tids, T, bad, hl, hr, regs, arrived, wanted, values=None, lay=None):
        w, r, c = map(int, np.argwhere(bad)[0])
        t, reg, path, note = self._holder(tids, w, hl[r, c], hr[r, c], regs, ins)
        v = None if values is None else values[w, r, c]
        return self.m.issue((p, "c", arrived), kind, ins, t, reg,
                            lambda: f"{arrived}: {self._describe(T[w, r, c], value=v, lay=lay)}{note}", wanted,
                            path=path)

    def _wit_prod(self, kind, ins, p, tids, T, bad, hl, hr, regs, which, kk, con, row_axis=True, values=None,
                  lay=None):
        w, i, j = map(int, np.argwhere(bad)[0])
        pos = i if row_axis else j
        t, reg, path, note = self._holder(tids, w, hl[pos], hr[pos], regs, ins)
        want = f"an element of {con.c.lhs if which == 'A' else con.c.rhs}"
        v = None if values is None else np.broadcast_to(values, bad.shape)[w, i, j]
        return self.m.issue((p, "operand", which), kind, ins, t, reg,
                            lambda: f"operand {which}, k slot {kk}: {self._describe(T[w, i, j], value=v, lay=lay)}"
                            f"{note}", want, path=path)

    def _wit_k(self, ins, p, tids, at, bt, bad, ha, hb, kk, K, con, am, ak, bk, bn, expected=None):
        w, i, j = map(int, np.argwhere(bad)[0])
        ta, ra, pa, na = self._holder(tids, w, ha[0][i], ha[1][i], ha[2], ins)
        tb, rb, pb, nb = self._holder(tids, w, hb[0][j], hb[1][j], hb[2], ins)
        a_k, b_k = int(ak[w, i, j]), int(bk[w, i, j])
        # blame the operand whose k is out of order: the accumulator's products so far plus the
        # k slot give the k an in-order kernel brings; else the k slot modulo the mma's K
        if expected is not None and (a_k == expected) != (b_k == expected):
            blame_b = a_k == expected
        else:
            blame_b = (a_k % K == kk) and (b_k % K != kk)
        t, reg, hp, note = (tb, rb, pb, nb) if blame_b else (ta, ra, pa, na)
        path = hp if hp is not None else (lambda: self.m.path_of(reg, t) + [(ins.line, ins.text)])
        return self.m.issue((p, "k"), "wrong-element", ins, t, reg,
                            lambda: f"k slot {kk} pairs {self._describe(at[w, i, j])} with {self._describe(bt[w, i, j])}"
                            f"{note}",
                            f"{con.c.lhs}[{int(am[w, i, j])}][k] x {con.c.rhs}[k][{int(bn[w, i, j])}] with the same k "
                            f"(A brings k = {a_k}, B brings k = {b_k}; operand {'B' if blame_b else 'A'} is out of order)",
                            path=path)

    def _wit_mn(self, ins, p, tids, at, bt, bad, hl, hr, regs, kk, con, am, bn, ids, col=False):
        w, i, j = map(int, np.argwhere(bad)[0])
        pos = j if col else i                       # the holder: of B's column, else of A's row
        t, reg, path, note = self._holder(tids, w, hl[pos], hr[pos], regs, ins)
        a = int(ids[w, i, j])
        origin = int(self.acc_set[a])
        if origin and origin != ins.line:
            path = self._origin_path(origin, t, col, ins, reg, path)
        return self.m.issue((p, "mn"), "wrong-element", ins, t, reg,
                            lambda: f"k slot {kk}: {self._describe(at[w, i, j])} x {self._describe(bt[w, i, j])} "
                            f"(a product for ({int(am[w, i, j])}, {int(bn[w, i, j])})){note}",
                            f"products for the accumulator's element ({self.acc_m[a]}, {self.acc_n[a]})", path=path)

    def _origin_path(self, line, t, col, ins, reg, path):
        """A witness path that starts at the earlier mma which fixed the accumulator's (m, n) (its B
        operand when the column is wrong, else its A): that mma's operand may be the wrong one."""
        m = self.m

        def full():
            mi = next((x for x in m.instrs if x.line == line), None)
            pre = []
            if mi is not None and len(mi.ops) > 2:
                op = mi.ops[2 if col else 1]
                names = [x.name for x in op.items if isinstance(x, Reg)] if isinstance(op, Vec) else \
                    ([op.name] if isinstance(op, Reg) else [])
                if names:
                    pre = list(m.path_of(names[0], t))
                pre.append((mi.line, mi.text))
            rest = path() if callable(path) else path
            if rest is None:
                rest = m.path_of(reg, t) if reg else [(ins.line, ins.text)]
            return pre + [x for x in rest if x not in pre]
        return full

    def _wit_dup(self, ins, p, tids, at, bad, hl, hr, regs, con, am, ak, bn, cls):
        w, i, j = map(int, np.argwhere(bad)[0])
        t, reg, path, note = self._holder(tids, w, hl[i], hr[i], regs, ins)
        return self.m.issue((p, "dup"), "duplicate-product", ins, t, reg,
                            lambda: f"a second product {_CLASS_NAMES[int(cls[w, i, j])]} with k = {int(ak[w, i, j])} "
                            f"for ({int(am[w, i, j])}, {int(bn[w, i, j])}): {self._describe(at[w, i, j])}{note}",
                            "each k once", path=path)

    # --------------------------------------------------------------- wgmma
    def wgmma(self, ins, p, form, tids, dregs, aregs, sd, A, B, atags, btags, aflat, bflat, d_in, a_in, descs):
        """A ``wgmma.mma_async`` of the warpgroups ``tids`` [G, 128]: its operands' tags come from the
        CTA's shared memory at the bytes the descriptor addresses (``atags`` / ``btags`` [G, mn, k, bytes],
        read by the interpreter through formal.smem's address map, the one the run uses) and from
        registers through the spec's fragments (A from registers, the accumulator D).  The products
        are then checked as an mma's: A[m][k] x B[k][n] for the accumulator's (m, n), each k once.
        ``sd`` [G]: scale-d (false: the accumulator starts from zero).  Returns d's tags per register."""
        self.mmas += 1
        self.wgmmas += 1
        self.wg_products_expected += len(tids) * int(np.prod(form.mnk))
        M, N, K = form.mnk
        dl = _frag(form, "d")
        den = dl[1]
        rowt = np.zeros(M, np.int64)
        coltt = np.zeros(N, np.int64)
        rowt[den["row"]] = den["thread"]                  # a thread holding an accumulator of row m / column n
        coltt[den["col"]] = den["thread"]
        Ct, Cv, Ci, Cl, Cr, Lc = self._elements(form, "d", dregs, d_in, tids, None, ins, p, form.dtype)
        if not np.all(sd):                                # scale-d false: D = A * B, the accumulator is not read
            z = ~np.asarray(sd, bool)
            Ct, Cv, Ci = Ct.copy(), Cv.copy(), Ci.copy()
            Ct[z], Cv[z], Ci[z] = 0, 0, 0
        if aregs:
            ra = list(aregs)
            opa = self._elements(form, "a", aregs, a_in, tids, None, ins, p, form.atype)
        else:
            ra = _Smem("A", aflat, descs[0], rowt, K)
            opa = self._smem_operand(ins, p, tids, ra, atags, A, form.atype)
        rb = _Smem("B", bflat, descs[1], coltt, K)
        Bt, Bv, Bi, Bl, Br, Lb = self._smem_operand(ins, p, tids, rb, btags, np.swapaxes(B, 1, 2), form.btype)
        opb = (np.swapaxes(Bt, 1, 2), np.swapaxes(Bv, 1, 2), np.swapaxes(Bi, 1, 2), Bl.T, Br.T, Lb)
        regs = {"a": ra, "b": rb, "c": list(dregs), "d": list(dregs)}
        return self._accumulate(ins, p, form, tids, regs, opa, opb, (Ct, Cv, Ci, Cl, Cr, Lc), None, dl,
                                fast=self.fast)

    def _smem_operand(self, ins, p, tids, holder, tags, vals, typ):
        """A shared-memory operand [G, mn, k]: first-byte tags, values, deferred type witnesses, holders
        (code mn * k + kk: the element's shared byte, :class:`_Smem`) and its value layout."""
        from ..layout import _value_bits
        m = self.m
        G, MN, K, nb = tags.shape
        bits = 8 * nb
        vb = _value_bits(typ, bits)
        lay = _Lay(bits, vb, bits - vb if typ == "tf32" else 0)
        v = np.asarray(vals, np.uint64)
        if lay.shift:
            v = v >> np.uint64(lay.shift)
        v = v & np.uint64((1 << vb) - 1)
        T0 = tags[..., 0]
        iss = np.zeros(T0.shape, np.int64)
        if typ and T0.any():
            bad, have = TG.read_check(tags.reshape(-1, nb), None, typ)
            bad = bad.reshape(G, MN, K)
            if bad.any():
                g, i, k = map(int, np.argwhere(bad)[0])
                t0 = int(T0[g, i, k])
                got = TG.fmt_name(int(have.reshape(G, MN, K)[g, i, k]))
                t, reg, path, note = holder.holder(m, tids, g, i * K + k, ins)
                n = m.issue((p, "type", holder.name), "wrong-type", ins, t, reg,
                            lambda: f"operand {holder.name} element {holder.coords(i, k)}: {self._describe(t0)} is "
                            f"{_encoded(m, t0, got)}; the instruction reads it as .{typ}{note}",
                            f"{holder.name} elements encoded as .{typ} (the instruction's type), or converted to it",
                            path=path)
                iss[bad] = n
        hl = np.arange(MN)[:, None] * K + np.arange(K)[None, :]
        return T0, v, iss, hl, np.zeros_like(hl), lay

    def _products_fast(self, con, ids, At, Ai, Bt, Bi, a_res, b_res) -> np.ndarray:
        """The products of each warpgroup whose operands are *separable*: every A element of k slot s
        and every B element of slot s bring the same k (for every m and n), A's row and B's column do
        not depend on the slot, and no k is new to none of the accumulators.  Then the product check
        of the M x N x K products is that of the M x K and K x N operand elements, and each
        accumulator gains the same k set.  Returns which warpgroups were done; the others (any
        doubt: a constant, a wrong element, a duplicate) go through :meth:`_products`, which finds
        the first wrong product.  Equal to :meth:`_products` where it applies (tests check both)."""
        W, M, K = At.shape
        N = Bt.shape[2]
        abch, am, ak, aok = self._coords(At, con.lhs, con.c.lhs_t)        # [W, M, K]
        bbch, bk, bn, bok = self._coords(Bt, con.rhs, con.c.rhs_t)        # [W, K, N]
        ga = (TG.kind(At) == TG.ELEM) & (TG.buf(At) == con.lhs_tag) & aok & (TG.deriv(At) != TG.ARITH) & (Ai == 0)
        gb = (TG.kind(Bt) == TG.ELEM) & (TG.buf(Bt) == con.rhs_tag) & bok & (TG.deriv(Bt) != TG.ARITH) & (Bi == 0)
        if self._producer(con, con.c.lhs) is not None:
            ga &= a_res
        if self._producer(con, con.c.rhs) is not None:
            gb &= b_res
        da, db = TG.deriv(At) == TG.RESID, TG.deriv(Bt) == TG.RESID
        ks, rows, cols, b0 = ak[:, 0, :], am[:, :, 0], bn[:, 0, :], abch[:, 0, 0]
        sep = ga.all(axis=(1, 2)) & gb.all(axis=(1, 2))
        sep &= (ak == ks[:, None, :]).all(axis=(1, 2)) & (bk == ks[:, :, None]).all(axis=(1, 2))
        sep &= (am == rows[:, :, None]).all(axis=(1, 2)) & (bn == cols[:, None, :]).all(axis=(1, 2))
        sep &= (abch == b0[:, None, None]).all(axis=(1, 2)) & (bbch == b0[:, None, None]).all(axis=(1, 2))
        sep &= (da == da[:, :1, :]).all(axis=(1, 2)) & (db == db[:, :, :1]).all(axis=(1, 2))
        cls = 2 * da[:, 0, :].astype(np.int64) + db[:, :, 0]                 # [W, K] formation of each slot
        key = np.sort(ks * 4 + cls, axis=1)
        sep &= ~(key[:, 1:] == key[:, :-1]).any(axis=1)                     # a k twice in this wgmma
        am_, an_, ab_ = self.acc_m[ids], self.acc_n[ids], self.acc_b[ids]    # [W, M, N]
        unset = am_ < 0
        same = (am_ == rows[:, :, None]) & (an_ == cols[:, None, :]) & (ab_ == b0[:, None, None])
        sep &= (unset | same).all(axis=(1, 2))
        if not sep.any():
            return sep
        word = ks >> 6
        add = np.zeros((W, 4, self.nwords), np.uint64)
        wi = np.broadcast_to(np.arange(W)[:, None], ks.shape)
        okk = (ks >= 0) & (word < self.nwords)
        sep &= okk.all(axis=1)
        np.bitwise_or.at(add, (wi[okk], cls[okk], word[okk]), np.uint64(1) << (ks[okk] & 63).astype(np.uint64))
        pairs = np.argwhere(add[sep].any(axis=0))
        for c, wd in pairs:                                                  # a product already there
            sel = sep & (add[:, c, wd] != 0)
            had = (self.kbits[ids[sel], c, wd] & add[sel, c, wd][:, None, None]) != 0
            sep[np.flatnonzero(sel)[had.any(axis=(1, 2))]] = False
        if not sep.any():
            return sep
        w = np.flatnonzero(sep)
        ids_s = ids[w]
        u = unset[w]
        if u.any():
            g = np.broadcast_to(np.arange(len(w))[:, None, None], u.shape)[u]
            self.acc_m[ids_s[u]] = np.broadcast_to(rows[w][:, :, None], u.shape)[u]
            self.acc_n[ids_s[u]] = np.broadcast_to(cols[w][:, None, :], u.shape)[u]
            self.acc_b[ids_s[u]] = b0[w][g]
            self.acc_set[ids_s[u]] = self._line
        for c, wd in pairs:
            sel = add[w, c, wd] != 0
            if sel.any():
                ii = ids_s[sel].reshape(int(sel.sum()), -1)
                np.bitwise_or.at(self.kbits, (ii, c, wd), add[w[sel], c, wd][:, None])
        n = len(w)
        self.products += n * M * N * K
        self.permuted += int(((ks[w] % K) != np.arange(K)[None, :]).sum()) * M * N
        self.formations += np.bincount(cls[w].ravel(), minlength=4)[:4] * M * N
        self.derivs["A"] += np.bincount(TG.deriv(At[w]).ravel(), minlength=4)[:4] * N
        self.derivs["B"] += np.bincount(TG.deriv(Bt[w]).ravel(), minlength=4)[:4] * M
        self.wg_fast += n
        return sep

    def on_tma_store(self, ins, p, gaddr, t, tmap, flat):
        """A TMA store: its bytes and tags were written like any store's (the output check reads them)."""
        return None

    # --------------------------------------------------------------- stores / verdict
    def on_store(self, ins, p, space, addr, tidx, eb, nv, srcs):
        return None

    def finish(self, sampled: bool) -> dict:
        """Check every output element; returns counts for the summary."""
        m = self.m
        checked = complete = arith = 0
        outs, steps, regonly = [], [], []
        for con in self.contracts:
            if any(self._reads(y, con) and y.out_tag == con.out_tag for y in self.contracts[self.contracts.index(con) + 1:]):
                steps.append(con.c.out)
                continue        # a chain step whose output a later step read and overwrote in place
            if self._registers_only(con):
                regonly.append(con.c.out)
                continue        # held in registers only: checked where it feeds the next contract (_chained)
            outs.append(con.c.out)
            b, o, nb = m.buffers[con.out - 1]
            eb = b.bits // 8
            idx = np.zeros(b.shape, dtype=np.int64)
            for d, s in enumerate(b.strides):
                sh = [1] * len(b.shape)
                sh[d] = -1
                idx = idx + np.arange(b.shape[d]).reshape(sh) * s
            byte0 = o + idx * eb
            written = m.heap.src[byte0] >= 0
            t0 = m.heap.tags[byte0]
            if len(b.shape) == 3:
                bch, r, c = np.indices(b.shape)
            else:
                r, c = np.indices(b.shape)
                bch = np.zeros_like(r)
            consider = written if sampled else np.ones(b.shape, bool)
            checked += int(consider.sum())
            unw = consider & ~written
            if unw.any():
                pos = tuple(int(x) for x in np.argwhere(unw)[0])
                self._wit_store("missing-product", None, byte0[pos], f"{b.name}{list(pos)} never stored",
                                f"{b.name}{list(pos)} = sum over k of {con.c.lhs}[m][k]*{con.c.rhs}[k][n]")
            k_ = TG.kind(t0)
            # deferred witnesses whose value reached this output: now observable
            iss = np.where(consider & written & (k_ == TG.ACC), self.acc_issue[np.where(k_ == TG.ACC, TG.idx(t0), 0)], 0)
            iss = np.where(consider & written, np.maximum(iss, TG.issue(t0)), 0)
            for bb in range(1, eb):
                iss = np.where(consider & written, np.maximum(iss, TG.issue(m.heap.tags[byte0 + bb])), iss)
            if iss.any():
                accid = np.where(k_ == TG.ACC, TG.idx(t0), -1)
                for i in np.unique(iss[iss > 0]):
                    at = iss == i
                    ex = self.example.get(int(i))
                    own = at & (accid == ex) if ex is not None else np.zeros_like(at)
                    pos = tuple(int(x) for x in np.argwhere(own if own.any() else at)[0])
                    src = int(m.heap.src[byte0[pos]])
                    where = f"{b.name}[{']['.join(map(str, pos))}]" + (
                        f" (stored at line {m.instrs[src].line})" if src >= 0 else "")
                    m.report(int(i), f"; this value reaches {where}" if ex is None or own.any() else
                             f"; this product's accumulator is not stored, but products of this instruction "
                             f"with the same fault reach {where}")
            notacc = consider & written & (k_ != TG.ACC)
            if notacc.any():
                pos = tuple(int(x) for x in np.argwhere(notacc)[0])
                self._wit_store("wrong-element", t0[pos], byte0[pos], f"{b.name}{list(pos)} holds "
                                f"{self._describe(t0[pos])}", f"the accumulator of ({r[pos]}, {c[pos]})")
            acc = consider & written & (k_ == TG.ACC)
            ids = np.where(acc, TG.idx(t0), 0)
            wrong = acc & ((self.acc_m[ids] != r) | (self.acc_n[ids] != c) | (self.acc_b[ids] != bch))
            if wrong.any():
                pos = tuple(int(x) for x in np.argwhere(wrong)[0])
                a = int(ids[pos])
                self._wit_store("wrong-address", t0[pos], byte0[pos],
                                f"the accumulator of ({self.acc_m[a]}, {self.acc_n[a]}) stored at {b.name}{list(pos)}",
                                f"the accumulator of ({r[pos]}, {c[pos]}) at {b.name}{list(pos)}")
            # bytes of one element from one accumulator, in order
            for bb in range(1, eb):
                tb = m.heap.tags[byte0 + bb]
                bad = acc & ~wrong & (tb != TG.with_byte(t0, TG.byte(t0) + bb))
                if bad.any():
                    pos = tuple(int(x) for x in np.argwhere(bad)[0])
                    self._wit_store("wrong-element", t0[pos], byte0[pos] + bb,
                                    f"byte {bb} of {b.name}{list(pos)} holds {self._describe(tb[pos])}",
                                    f"byte {bb} of the accumulator of ({r[pos]}, {c[pos]})")
                    break
            good = acc & ~wrong
            # the accumulator encoded as the buffer's type, all of its bytes
            f0 = TG.fmt(t0)
            fmts = {int(x) for x in np.unique(f0[good])} - {0}
            for fc in sorted(fmts):
                fn = TG.fmt_name(fc)
                if not (TG.compatible(fn, b.type) and TG.fmt_bits(fn) == b.bits):
                    pos = tuple(int(x) for x in np.argwhere(good & (f0 == fc))[0])
                    self._wit_store("wrong-type", t0[pos], byte0[pos],
                                    f"{b.name}{list(pos)} holds the accumulator of ({r[pos]}, {c[pos]}) encoded as .{fn}"
                                    + (f" ({eb} of its {TG.fmt_bits(fn) // 8} bytes)" if TG.fmt_bits(fn) != b.bits
                                       else ""),
                                    f"the value encoded as .{b.type}, the declared type of {b.name}")
            K = con.K
            fullw = self._required(con, r)                              # [..., nwords]: the k's each output needs
            kb = self.kbits[ids]                                       # [..., 4, nwords]
            have = (kb != 0).any(axis=-1)                               # formation present
            isfull = (kb == fullw[..., None, :]).all(axis=-1)
            okk = have[..., 0] & isfull[..., 0] & (~have[..., 1:] | isfull[..., 1:]).all(axis=-1)
            miss = good & ~okk
            if miss.any():
                pos = tuple(int(x) for x in np.argwhere(miss)[0])
                a = int(ids[pos])
                got = [k for k in range(K) if (int(self.kbits[a, 0, k >> 6]) >> (k & 63)) & 1]
                need = [k for k in range(K) if (int(fullw[pos][k >> 6]) >> (k & 63)) & 1]
                lacking = [k for k in need if k not in set(got)]
                K = len(need)
                cl = [n for n, h in zip(_CLASS_NAMES, have[pos]) if h and n != "A*B"]
                self._wit_store("missing-product", t0[pos], byte0[pos],
                                f"the accumulator of ({r[pos]}, {c[pos]}) has {len(got)} of {K} products A*B"
                                + (f"; missing k = {_short(lacking)}" if lacking else "")
                                + (f"; incomplete {', '.join(cl)}" if cl and not lacking else ""),
                                f"all {K} products {con.c.lhs}[{r[pos]}][k]*{con.c.rhs}[k][{c[pos]}]")
            if con.addend is not None:
                noadd = good & okk & ~self.acc_add[ids]
                if noadd.any():
                    pos = tuple(int(x) for x in np.argwhere(noadd)[0])
                    self._wit_store("missing-product", t0[pos], byte0[pos],
                                    f"the accumulator of ({r[pos]}, {c[pos]}) did not start from {con.c.addend}",
                                    f"{con.c.addend}[{r[pos]}][{c[pos]}] + the products")
                    okk = okk & self.acc_add[ids]
            complete += int((good & okk).sum())
            arith += int((good & okk & (TG.deriv(t0) == TG.ARITH)).sum())
        return {"checked": checked, "complete": complete, "through_arithmetic": arith, "outputs": outs,
                "chain_steps": steps, "in_registers": regonly}

    def _wit_store(self, kind, tag, byte, arrived, wanted):
        m = self.m
        src = int(m.heap.src[byte])
        if src >= 0:
            ins = m.instrs[src]
            t = int(m.heap.writer[byte]) if hasattr(m.heap, "writer") and m.heap.writer[byte] >= 0 else 0
        else:
            ins = m.instrs[-1] if m.instrs else None
            t = 0
        path = []
        if tag is not None and int(TG.kind(tag)) == TG.ACC:
            a = int(TG.idx(tag))
            mi = next((i for i in m.instrs if i.line == int(self.acc_line[a])), None)
            if mi is not None:
                if kind == "wrong-address" and mi.line in self.acc_regs:
                    # the operand that brought the wrong row (A) or column (B)
                    ra, rb = self.acc_regs[mi.line]
                    for r in (rb[0], ra[0]):
                        for x in m.path_of(r, int(self.acc_t[a])):
                            if x not in path:
                                path.append(x)
                path.append((mi.line, mi.text))
        if src >= 0:
            reg_ops = [o.name for o in _regs_of(ins)]
            if reg_ops:
                for x in m.path_of(reg_ops[0], t):
                    if x not in path:
                        path.append(x)
            if (ins.line, ins.text) not in path:
                path.append((ins.line, ins.text))
        m.witness(kind, ins, t, "", arrived, wanted, path=path)


class _Lay:
    """The value layout of a shared-memory operand's elements (what _zero / _describe need)."""

    def __init__(self, elem_bits: int, value_bits: int, shift: int = 0):
        self.elem_bits, self.value_bits, self.shift = elem_bits, value_bits, shift


class _Smem:
    """A wgmma operand read from shared memory through a descriptor.  It stands where an mma
    operand's register list stands: the holder of slot code ``mn * K + kk`` is the shared byte
    the descriptor maps element (mn, kk) to, reached through the descriptor register, written by
    the store (st.shared, cp.async, TMA) that last wrote it."""

    def __init__(self, name: str, flat, desc_reg: str, threads, K: int):
        self.name = name                  # "A" | "B"
        self.flat = flat                  # [G, mn, k] flat shared-memory index of the element's first byte
        self.desc_reg = desc_reg          # the descriptor's register ("" for an immediate)
        self.threads = threads            # [mn] a thread (0..127) of the warpgroup whose accumulators it feeds
        self.K = K

    def __iter__(self):                  # the registers it is read through
        return iter([self.desc_reg] if self.desc_reg else [])

    def coords(self, mn: int, kk: int) -> str:
        return f"({mn}, {kk})" if self.name == "A" else f"({kk}, {mn})"

    def holder(self, m, tids, w: int, code: int, ins):
        mn, kk = divmod(int(code), self.K)
        t = int(tids[w, self.threads[mn]])
        fl = int(self.flat[w, mn, kk])
        src = int(m.shared.src[fl])
        wr = int(m.shared.writer[fl])
        st = m.instrs[src] if src >= 0 else None

        def path():
            out = list(m.path_of(self.desc_reg, t)) if self.desc_reg else []
            if st is not None:
                if st.head == "st" and wr >= 0:           # the stored value's own path
                    for o in _regs_of(st)[:1]:
                        out += [x for x in m.path_of(o.name, wr, limit=8) if x not in out]
                if (st.line, st.text) not in out:
                    out.append((st.line, st.text))
            out.append((ins.line, ins.text))
            return out
        note = (f" (warpgroup {int(m.warp[t]) // 4}: {self.name} element {self.coords(mn, kk)} of the wgmma at "
                f"shared byte {fl % m.S:#x} through descriptor {self.desc_reg or 'immediate'}"
                + (f", written at line {st.line} by {st.text.split()[0]}" if st is not None else ", never written")
                + ")")
        return t, self.desc_reg, path, note


def _reg_names(regs) -> list:
    return list(regs)


def _encoded(m, t0, got):
    """'a .f16 value, as A is declared' / 'a .f32 value (A is declared .f16)'."""
    if TG.kind(t0) == TG.ELEM and m.prov is not None and 0 < int(TG.buf(t0)) <= len(m.spec.buffers):
        b = m.spec.buffers[int(TG.buf(t0)) - 1]
        return f"a .{got} value" + (f", as {b.name} is declared" if got == b.type else f" ({b.name} is declared .{b.type})")
    return f"a .{got} value"


def _is_int(typ) -> bool:
    return bool(typ) and typ[0] in "subs" and typ not in ("bf16",) and typ[1:].isdigit()


def _regs_of(ins):
    from .parse import Reg, Vec
    out = []
    for o in ins.ops[1:]:
        if isinstance(o, Reg):
            out.append(o)
        elif isinstance(o, Vec):
            out += [x for x in o.items if isinstance(x, Reg)]
    return out


def _short(ks):
    if len(ks) <= 8:
        return str(ks)
    return str(ks[:8])[:-1] + f", ... ({len(ks)} in all)]"
