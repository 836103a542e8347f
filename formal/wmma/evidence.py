"""The wmma hardware evidence record, ``proofs/evidence/wmma_h100.json``.

Built from a run's output directories (the map/pipeline run of ``python -m
formal.hw.wmma_probe OUT`` and the alignment run of ``--alignment``), never typed in:
every count is recomputed here, the pipeline D against ``formal.evaluate_matrices`` bit for
bit.  The README's hardware table reads ``summary_runs`` and ``summary_result``
(:func:`formal.evidence.table`)::

    python -m formal.wmma.evidence WMMA_RUN_DIR ALIGN_RUN_DIR [ALIGN_RESUME_DIR ...] > proofs/evidence/wmma_h100.json

``tests/test_wmma_evidence.py`` checks the record against the checked-in condensed data
(``specs/observed/``).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

GPU = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "target": "sm_90",
       "driver_version": "580.159.04", "driver": "13.0", "cuda_runtime": "13.2", "cupy": "14.2.0"}


def build(wmma_run: str | Path, align_runs: list[str | Path], run: str = "run3", date: str = "2026-11-22") -> dict:
    from .. import catalog as cat
    from . import alignment as al
    from . import pipeline as pl
    from . import probes as W

    wmma_run = Path(wmma_run)
    man = json.loads((wmma_run / "wmma_probe_manifest.json").read_text())
    obs = json.loads((wmma_run / "wmma_sm90_observed.json").read_text())
    status = Counter(r["status"] for r in man.get("status", {}).values())     # the 798 map probes' own records
    maps = obs["maps"]
    fams = {(m["kind"], m["opcode"].replace(f".{m['space']}.", ".") if m["space"] else m["opcode"]) for m in maps}
    every = set()
    for fam in ("wmma.load", "wmma.store"):
        for f in W._base_forms(fam, W.TARGET, W.PTX_VERSION):
            base = f.opcode.replace(f".{f.space}.", ".") if f.space else f.opcode
            every.add(("load" if fam == "wmma.load" else "store", base))
    anomalies = sum(1 for m in maps for k, v in m["anomalies"].items() if k != "tf32_low_bits" and v)

    rep = pl.check_pipeline_data(wmma_run)
    pdoc = json.loads((wmma_run / "wmma_pipeline.json").read_text())
    runs = Counter(e["runs"] for e in pdoc["entries"])
    mism = [e for e in rep.entries if e.status == "mismatch"]

    docs = [al.load_run(p) for p in align_runs]
    doc = al.merge_runs(docs)
    a = al.analyse(doc)
    rr = Counter(r["status"] for r in doc.get("reruns", []))
    jobs = len(doc["probes"]) + len(doc.get("reruns", []))
    ran = a["ran"] + sum(rr.values())
    st = a["status_counts"]
    verdicts = {e["id"]: e["status"] for e in a["errata"]}

    c = rep.counts
    n_match = c.get("match", 0)
    summary_runs = (f"{len(man['probes'])} load/store probes, {len(rep.entries)} pipelines x {max(runs)} runs, "
                    f"{ran:,} alignment probes (of {jobs:,})")
    result = [f"maps of all {len(fams & every)} families observed" + ("" if anomalies == 0 else f" ({anomalies} anomalies)"),
              f"{n_match}/{len(rep.entries)} pipelines bit-exact",
              f"alignment: the SASS model (access width + stride shift) predicts all {a['sass_model']['checked']:,} "
              f"probes; .shared ldmatrix needs 16 B rows, elsewhere the access width suffices; a stride below it "
              f"faults or moves rows silently ({a['wrong_data']['count']} probes)"]
    return {
        "kind": "ptx-formal wmma evidence",
        "date": date,
        "run": run,
        "gpu": dict(GPU),
        "ptx": "7.8 .target sm_90 (driver JIT)",
        "summary_runs": summary_runs,
        "summary_result": "; ".join(result),
        "maps": {"harness": "python -m formal.hw.wmma_probe OUT (fault-isolated workers)",
                 "probes": len(man["probes"]), "status": dict(status), "families": len(fams & every),
                 "families_total": len(every), "maps_decoded": len(maps), "anomalies": anomalies,
                 "file": "specs/observed/wmma_sm90_h100.json"},
        "pipelines": {"entries": len(rep.entries), "runs_per_entry": max(runs),
                      "elements": sum(e.runs * cat.parse(e.opcode).mnk[0] * cat.parse(e.opcode).mnk[1]
                                      for e in rep.entries),
                      "counts": c, "arch": rep.arch,
                      "mismatches": [{"kernel": e.kernel, "opcode": e.opcode, "first": {k: e.detail[k] for k in
                                      ("run", "row", "col", "silicon", "expected")},
                                      "differing_elements": e.detail["differing_elements"]} for e in mism],
                      "slice": "specs/observed/wmma_pipeline_slice_sm90.json"},
        "alignment": {"harness": "python -m formal.hw.wmma_probe --alignment OUT (fault-isolated workers; a run its "
                                 "deadline cut is finished with --resume and merged)",
                      "runs": [{k: d["meta"].get(k) for k in ("created", "deadline_s", "time_s", "workers")} | {
                          "ran": sum(1 for e in d["probes"] if al._ran(e))} for d in docs],
                      "overlap": doc["meta"].get("overlap"),
                      "jobs": jobs, "sweep_probes": len(doc["probes"]), "status": st,
                      "reruns": dict(rr), "wrong_data": a["wrong_data"]["count"],
                      "wrong_data_patterns": dict(Counter(f"{v.get('kind')} {v['pattern']}"
                                                          for v in a["wrong_data"].get("decoded", {}).values())),
                      "wrong_data_reproduced": sum(1 for v in a["wrong_data"].get("decoded", {}).values()
                                                   if v.get("reproduces")),
                      "sass_model_agrees": a["sass_model"]["checked"] - a["sass_model"]["disagreements"],
                      "sass_model_checked": a["sass_model"]["checked"],
                      "sass_model_outcomes": a["sass_model"]["outcomes"],
                      "text_agrees": {rd: t["agrees"] for rd, t in a["text"].items()},
                      "errata": verdicts, "file": "specs/observed/wmma_alignment_sm90.json"},
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2:
        print("usage: python -m formal.wmma.evidence WMMA_RUN_DIR ALIGN_RUN_DIR [ALIGN_RUN_DIR ...]", file=sys.stderr)
        return 2
    print(json.dumps(build(argv[0], argv[1:]), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
