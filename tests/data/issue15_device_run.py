"""Device run for issue 15: (1) the new coverage vectors (every coverage model incl. mechanisms and
probes) of 18 forms, (2) the model-distinguishing (identify) vectors of 9 forms, through the CuPy
harness; results saved for the offline analysis (floor decisions, identification)."""
import json
import os
import time

t0 = time.time()
from formal.hw.runner import GPU
from formal.hw.vectors import run_vectors_on_gpu

out = os.environ["OUT"]
gpu = GPU()
print("gpu", gpu.info.to_dict(), flush=True)
summ = {}
for tag, lst, vdir in (("coverage", "../w15_forms.txt", "../w15vec"), ("identify", "../w15_idforms.txt", "../w15id")):
    forms = [l.strip() for l in open(lst) if l.strip()]
    res = run_vectors_on_gpu(forms, os.path.join(out, tag), vectors_dir=vdir, gpu=gpu, save_results=True)
    summ[tag] = res
    print(tag, json.dumps({k: v for k, v in res.items() if k != "forms"}, default=str), flush=True)
    for f in res["forms"]:
        print(" ", f["opcode"], f["vectors"], f["mismatches"], f["digest"][:24], flush=True)
summ["wall_s"] = round(time.time() - t0, 1)
json.dump(summ, open(os.path.join(out, "summary_w15.json"), "w"), indent=1, default=str)
