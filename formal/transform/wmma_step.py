"""wmma.load / wmma.store with a stride, as a movement.

The memory side is the wmma engineer's ``specs/wmma_memory.toml`` (through
``formal.wmma.memory``): element (row, col) of the matrix is element ``index(row, col,
stride)`` from the base pointer (``row * stride + col`` for .row, ``col * stride + row``
for .col), at bit ``8 * ptr + index * elem_bits``; the alignment and stride rules there
are this step's undefined-behaviour guards, plus "the same values of p and stride" in
every thread.

The register side -- which (row, col) each (lane, register, element) holds -- is
unspecified by PTX (9.7.14.4.1) and differs per architecture.  A recipe names the map it
assumes with a ``wmma-map`` directive (formulas over lane, reg, elem, i); the proof is
then conditional on that map.
"""

from __future__ import annotations

import numpy as np

from .. import catalog as cat
from .spaces import UNDEF, TransformError, const_content, ite_content
from .steps import Addr, ElementStore, Guard, Imm, Name, Step, _store_conflict_guard, _vec


class WmmaMove(ElementStore, Step):
    def __init__(self, text, quals, ops):
        from ..wmma import memory as wm

        self.text = text
        opcode = text.split()[0].rstrip(";")
        try:
            form = cat.parse(opcode)
        except cat.MalformedOpcode as e:
            raise TransformError(f"{text}: {e}") from None
        if form.family not in ("wmma.load", "wmma.store"):
            raise TransformError(f"{text}: only wmma.load / wmma.store move data")
        try:
            self.view = wm.memory_view(form)
        except cat.BadArgument as e:
            raise TransformError(f"{text}: {e}") from None
        self.form, self.store = form, form.family == "wmma.store"
        self.kind = form.family
        self.section = wm.spec().layouts[self.view.layout].section
        self.evidence, self.sm90 = "text (memory side); fragment map assumed", True
        self.f_index = wm.spec().layouts[self.view.layout].index
        self.f_bit = wm.spec().address["bit"]
        self.rules = [r for r in wm.spec().rules if r.kind in ("alignment", "stride")]
        self.f_frag_bytes = wm.spec().fragment_bytes[wm.spec().default_reading]
        if len(ops) not in (2, 3):
            raise TransformError(f"{text}: expected r, [p] {{, stride}}")
        vec_op, addr_op = (ops[1], ops[0]) if self.store else (ops[0], ops[1])
        self.regs = list(_vec(vec_op, "the fragment", text))
        self.nregs, self.epr = self.view.regs, max(1, self.view.reg_bits // max(self.view.elem_bits, 1))
        if self.form.operands["r"].elems_per_reg:
            self.epr = self.form.operands["r"].elems_per_reg
        self.dst_bits = self.view.reg_bits // self.epr
        if len(self.regs) != self.nregs:
            raise TransformError(f"{text}: the fragment has {self.nregs} registers, got {len(self.regs)}")
        if not isinstance(addr_op, Addr):
            raise TransformError(f"{text}: the address operand must be [p] or [p+imm]")
        self.addr = addr_op
        self.stride = ops[2] if len(ops) == 3 else Imm(self.view.default_stride)
        if not isinstance(self.stride, (Imm, Name)):
            raise TransformError(f"{text}: stride must be an immediate or a value name")
        self.writes = [] if self.store else list(self.regs)
        self.reads = list(self.regs) if self.store else []
        self.writes_mem, self.reads_mem = self.store, not self.store
        self.widths = {r: self.view.reg_bits for r in self.regs}
        self.granularity = min(self.view.elem_bits, self.dst_bits)

    def _map(self, ctx):
        m = ctx.prog.wmma_maps.get(self.form.opcode) if hasattr(ctx.prog, "wmma_maps") else None
        if m is None:
            raise TransformError(f"{self.text}: the wmma fragment map is unspecified by PTX (9.7.14.4.1); give the "
                                 f"map you assume: `wmma-map {self.form.opcode} row \"F\" col \"F\"`")
        return m

    def _base(self, ctx, lane):
        ops = ctx.ops
        v = ctx.value(self.addr.base, lane)
        return (ops.bv(v) + self.addr.offset) if ops.is_z3 else v + self.addr.offset

    def _elem_bit(self, ctx, lane, j, e):
        ops = ctx.ops
        m = self._map(ctx)
        env = {"lane": lane, "reg": j, "elem": e}
        rc = m.z3(env) if ops.is_z3 else m._eval({k: np.asarray(v) for k, v in env.items()})
        stride = ctx.value(self.stride, lane)
        idx = ops.formula(self.f_index, {"row": rc["row"], "col": rc["col"], "stride": stride})
        bit = ops.formula(self.f_bit, {"ptr": self._base(ctx, lane), "index": idx, "elem_bits": self.view.elem_bits})
        return bit, lane

    def pull(self, ctx, k, name, L, B):
        ops = ctx.ops
        j = self.regs.index(name)
        w = self.dst_bits
        e, b = ops.div(B, w), ops.mod(B, w)
        start, _ = self._elem_bit(ctx, L, ops.const(j) if ops.is_z3 else np.full_like(L, j), e)
        A = start + ops.bv(b) if ops.is_z3 else start + b
        got = ctx.read_mem(k, A)
        held = self._held(ctx, L, j, e)
        got = ite_content(ops, held, got, const_content(ops, UNDEF))
        return got, ("mem", "shared", 0, A)

    def _held(self, ctx, L, j, e):
        m = self._map(ctx)
        ops = ctx.ops
        if ops.is_z3:
            return m.z3_domain({"lane": L, "reg": ops.const(j) if isinstance(j, int) else j, "elem": e})
        env = {"lane": np.asarray(L), "reg": np.broadcast_to(np.asarray(j), np.shape(L)), "elem": np.asarray(e)}
        return m.domain_mask({k: v.reshape(-1) for k, v in env.items()}).reshape(np.shape(L))

    def guards(self, ctx):
        v = self.view
        env0 = dict(v.base_env())
        fb = int(self.f_frag_bytes.eval(env0))
        out = []

        def uniform(ops, ctx, k, env):
            l = env["l"]
            z = ops.const(0) if ops.is_z3 else np.zeros_like(l)
            return ops.or_(ops.not_(ops.eq(self._base(ctx, l), self._base(ctx, z))),
                           ops.not_(ops.eq(ctx.value(self.stride, l), ctx.value(self.stride, z))))

        out.append(Guard("lane l uses a different p or stride than lane 0 (9.7.14.4.3: undefined)", [("l", 32)],
                         uniform))
        for rule in self.rules:
            dims = [("ld", v.n_ld)] if rule.forall == "ld" else [("ld", 1)]

            def bad(ops, ctx, k, env, rule=rule):
                z = ops.const(0) if ops.is_z3 else np.zeros_like(env["ld"])
                e = dict(env0, ptr=self._base(ctx, z), stride=ctx.value(self.stride, z), frag_bytes=fb,
                         ld=env["ld"])
                return ops.not_(ops.truth(ops.formula(rule.holds, e)))

            out.append(Guard(f"{rule.id}: {rule.text[:120]} ({rule.section})", dims, bad))
        if self.store:
            out.append(_store_conflict_guard(self))
        return out

    def addresses(self, ctx):
        L, J, E, start = self._writes(ctx)
        return int(start.min()), int(start.max()) + self.view.elem_bits
