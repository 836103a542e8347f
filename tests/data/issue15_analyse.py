"""Offline: the H100 results of the issue-15 device run -> evidence record."""
import glob, json, os, sys
import numpy as np
from formal.vectors import read, read_results, compare
from formal.hw.vectors import file_name
from formal.vectors.witness import decide_variants, failing_elements
from formal.vectors.build import Case, VectorSet
from formal.vectors.draft import evaluate_inputs

res_dir = sys.argv[1]            # files_at
summ = json.load(open(os.path.join(res_dir, "summary_w15.json")))
rec = {"kind": "issue 15: mechanism/probe coverage vectors and model-distinguishing vectors on the H100",
       "device": summ["coverage"]["device"], "wall_s": summ["wall_s"], "coverage": [], "identify": []}
for f in summ["coverage"]["forms"]:
    op = f["opcode"]
    vs = read(os.path.join("/tmp/w15vec", file_name(op)))
    assert vs.digest == f["digest"], op
    got = read_results(os.path.join(res_dir, "coverage", "results", file_name(op)[:-4] + ".hex"), vs)
    rep = compare(vs, got)
    dec = decide_variants(vs, got)
    ref = dec.pop("reference (the sm_90 model)")
    pts = sorted(p for p in vs.points() if p.startswith(("mech:", "silicon:", "probe:", "nan_multi")))
    rec["coverage"].append({"opcode": op, "vectors": len(vs), "digest": vs.digest, "mismatches": rep.failed,
                            "model_refuted_on": ref["refuted_on"], "built_elements": ref["elements"],
                            "points": pts,
                            "variants_refuted": sorted(k for k, v in dec.items() if v.get("refuted_on")),
                            "variants_not_refuted": sorted(k for k, v in dec.items() if not v.get("refuted_on"))})
    print(op, len(vs), rep.failed, "refuted", len(rec["coverage"][-1]["variants_refuted"]), "of", len(dec))
for f in summ["identify"]["forms"]:
    op = f["opcode"]
    vs = read(os.path.join("/tmp/w15id", file_name(op)))
    assert vs.digest == f["digest"], op
    got = read_results(os.path.join(res_dir, "identify", "results", file_name(op)[:-4] + ".hex"), vs)
    mism = {}
    for a in vs.header["archs"]:
        exp = evaluate_inputs(vs.form, [c.inputs for c in vs.cases], [c.sel for c in vs.cases], a)
        va = VectorSet(vs.opcode, a, vs.seed, vs.level, [Case(c.id, c.opcode, c.sel, c.points, c.why, c.inputs,
                       np.asarray(e), c.targets, c.level) for c, e in zip(vs.cases, exp)])
        mism[a] = len(failing_elements(va, got))
    ident = [a for a, n in mism.items() if n == 0]
    rec["identify"].append({"opcode": op, "vectors": len(vs), "digest": vs.digest, "mismatching_elements": mism,
                            "identified": ident})
    print(op, "identified", ident, mism)
rec["total_vectors"] = sum(r["vectors"] for r in rec["coverage"])
rec["total_mismatches"] = sum(r["mismatches"] for r in rec["coverage"])
json.dump(rec, open(sys.argv[2], "w"), indent=1)
