#!/usr/bin/env bash
# GPU step `serve_checks` (issue 31): two serving checks of `petal serve` on a real GPU.
#  1. router: an inference-free SPLADE Router folder (tests/fixtures/classify/bert-splade-router,
#     with the seeded bert-splade folder as its document_0_MLMTransformer, assembled here as
#     tests/e2e/splade_router_fixture.h's RouterFolder does) and the bert-cls classifier behind one
#     gateway (`model` picks one). Against golden_bert-splade-router.json: queries (the static
#     module in the gateway, no engine) through /embed_sparse prompt_name=query and /v1/embeddings
#     sparse + input_type=query: same indices, values within 1e-5; documents (the engine) through
#     /embed_sparse (no route and prompt_name=document) and /v1/embeddings sparse: on cuda (bf16)
#     every golden top-64 entry >= 0.05 non-zero, no entry well above the golden's 64th value
#     outside its top 64, and cosine over the top-64 entries >= 0.999 (sum and nnz recorded); on
#     cpu (--cpu-precision=fp32) values within 1e-4, the sum within 1e-4 relative, nnz within the
#     golden's near-zero count. bert-cls /predict:
#     200, probabilities sum to 1 (within 1e-4) and, as a record, beside golden_bert-cls.json.
#  2. memory (cuda only; skipped on cpu): the start-up GPU memory check (cmd_serve.cc
#     SharedGpusFit, gpu_memory.h): (a) step 1's serve log has "models share a GPU"; (b) three
#     models x --replicas 64 (192 engines x (weights + 1 GiB reserve) > an H200's ~140 GiB; two
#     models at the --replicas cap of 64 would fit) must exit non-zero within `timeout 120` with
#     "cannot serve these models together" naming the models.
# The model folders are built from the fixtures' seed (scripts/ref/classify_numpy.py's tensor list,
# scripts/gpu/golden_layouts.py's generator, fp32 safetensors as tests/layouts/layout_fixture.cc
# writes them) in a temp folder under /tmp, removed at exit. Needs python3 with numpy (the GPU
# machine's; SERVE_CHECKS_PYTHON picks another) and models/all-MiniLM-L6-v2/tokenizer.json
# (carry it). Results: $OUT/serve_checks/{router.json,memory.json,serve.log,refuse.log}. ~1 min.
# Dry run on the CPU:
#   SERVE_CHECKS_BACKEND=cpu OUT=/tmp/sc_out PATH=/work/main/build/cpu/bin:$PATH \
#     bash scripts/gpu/steps/serve_checks.sh
set -euo pipefail
BACKEND="${SERVE_CHECKS_BACKEND:-cuda}"
PY="${SERVE_CHECKS_PYTHON:-python3}"
D="$OUT/serve_checks"
mkdir -p "$D"
say() { printf '[serve_checks %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
TOK=models/all-MiniLM-L6-v2/tokenizer.json
[[ -f $TOK ]] || { say "missing $TOK (carry models/all-MiniLM-L6-v2/tokenizer.json)"; exit 1; }

TMP=$(mktemp -d /tmp/petal-serve-checks-XXXXXX)
SERVE_PID=""
stop_serve() {
  [[ -n "$SERVE_PID" ]] || return 0
  kill -TERM "$SERVE_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SERVE_PID" 2>/dev/null || true
  wait "$SERVE_PID" 2>/dev/null || true
  SERVE_PID=""
}
cleanup() { stop_serve; rm -rf "$TMP"; }
trap cleanup EXIT

# --- the model folders: bert-splade (seeded) -> the Router's document transformer; bert-cls.
say "building the fixture folders in $TMP"
"$PY" - "$TMP" <<'PY'
import json, os, shutil, struct, sys
import numpy as np
sys.path.insert(0, "scripts/ref")
from classify_numpy import state_dict_shapes, tensor_values  # noqa: E402

tmp = sys.argv[1]
fx_dir = "tests/fixtures/classify"
manifest = json.load(open(os.path.join(fx_dir, "classify.json"), encoding="utf-8"))
specs = {f["name"]: f for f in manifest["fixtures"]}

def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)

def build(name, out):
    fx = specs[name]
    shutil.copytree(os.path.join(fx_dir, name), out)
    cfg = json.load(open(os.path.join(out, "config.json")))
    golden = json.load(open(os.path.join(fx_dir, f"golden_{name}.json"), encoding="utf-8"))
    tensors = {}
    for t, shape in state_dict_shapes(cfg).items():
        v = tensor_values(manifest["seed"], t, shape, fx["weight_std"])
        s = float(v.astype(np.float64).sum())
        g = golden["tensor_sums"][t]
        if abs(s - g) > 1e-9 * (1 + abs(s)):
            sys.exit(f"{name}: tensor {t} sums to {s}, the golden's to {g}")
        tensors[t] = v
    write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    shutil.copy(os.path.join(fx["tokenizer"], "tokenizer.json"), out)
    with open(os.path.join(out, "petal_config.json"), "w") as f:
        f.write('{"max_seq_length": %d}\n' % fx["max_length"])

built = os.path.join(tmp, "built-bert-splade")
build("bert-splade", built)
build("bert-cls", os.path.join(tmp, "bert-cls"))
# The Router (splade_router_fixture.h RouterFolder): the committed folder, the built folder's
# files (not its modules.json / config_sentence_transformers.json) as document_0_MLMTransformer/,
# and the built petal_config.json at the top.
router = os.path.join(tmp, "bert-splade-router")
shutil.copytree(os.path.join(fx_dir, "bert-splade-router"), router)
doc = os.path.join(router, "document_0_MLMTransformer")
os.makedirs(doc, exist_ok=True)
for f in os.listdir(built):
    p = os.path.join(built, f)
    if os.path.isfile(p) and f not in ("modules.json", "config_sentence_transformers.json"):
        shutil.copy(p, os.path.join(doc, f))
shutil.copy(os.path.join(built, "petal_config.json"), os.path.join(router, "petal_config.json"))
print("built", router, "and", os.path.join(tmp, "bert-cls"))
PY

# --- 1. both models behind one gateway.
say "== router: petal serve --backend $BACKEND (Router + bert-cls)"
LOG="$D/serve.log"
# On the CPU the engine runs fp32 (the tests' precision; auto may pick bf16 or fast fp32).
EXTRA=()
[[ $BACKEND == cpu ]] && EXTRA=(--server-arg=--cpu-precision=fp32)
petal serve --backend "$BACKEND" --listen 127.0.0.1:0 --shutdown-grace-ms 1000 "${EXTRA[@]}" \
  --model "$TMP/bert-splade-router" --model "$TMP/bert-cls" \
  --model-name bert-splade-router --model-name bert-cls > "$LOG" 2>&1 &
SERVE_PID=$!
PORT=""
for _ in $(seq 1 1800); do  # 180 s
  PORT=$(grep -oE 'gateway listening.* port=[0-9]+' "$LOG" | grep -oE '[0-9]+$' | head -1 || true)
  if [[ -n "$PORT" ]] && env -u LD_LIBRARY_PATH curl -sf "http://127.0.0.1:$PORT/ready" > /dev/null; then
    break
  fi
  PORT=""
  kill -0 "$SERVE_PID" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "$PORT" ]]; then
  say "petal serve did not become ready; last lines of $LOG:"; tail -20 "$LOG"; exit 1
fi
say "ready on port $PORT"

rc=0
"$PY" - "http://127.0.0.1:$PORT" "$BACKEND" "$D/router.json" <<'PY' || rc=1
import json, math, sys, urllib.error, urllib.request
url, backend, out = sys.argv[1], sys.argv[2], sys.argv[3]
g = json.load(open("tests/fixtures/classify/golden_bert-splade-router.json", encoding="utf-8"))
texts = [c["text"] for c in g["cases"]]

def post(route, body):
    req = urllib.request.Request(url + route, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")[:300]

def parse(body, openai):
    if openai:
        return [{int(i): v for i, v in zip(d["embedding"]["indices"], d["embedding"]["values"])}
                for d in body["data"]]
    return [{int(e["index"]): e["value"] for e in lst} for lst in body]

result = {"backend": backend, "url": url, "cases": [], "pass": True}
def record(case):
    result["cases"].append(case)
    if not case["pass"]:
        result["pass"] = False
    print("%-44s %s  %s" % (case["name"], "PASS" if case["pass"] else "FAIL",
                            ", ".join("%s=%s" % (k, v) for k, v in case.items()
                                      if k not in ("name", "pass", "per_text", "body"))))

queries = [
    ("query /embed_sparse prompt_name=query", "/embed_sparse",
     {"inputs": texts, "truncate": True, "prompt_name": "query"}, False),
    ("query /v1/embeddings input_type=query", "/v1/embeddings",
     {"input": texts, "sparse": True, "truncate": True, "input_type": "query"}, True),
]
for name, route, body, openai in queries:
    body["model"] = "bert-splade-router"
    st, b = post(route, body)
    case = {"name": name, "status": st}
    if st != 200:
        case.update({"pass": False, "body": b}); record(case); continue
    got = parse(b, openai)
    worst, idx_ok = 0.0, len(got) == len(texts)
    for i, want in enumerate(c["query"] for c in g["cases"]):
        if i >= len(got):
            break
        if sorted(got[i]) != want["indices"]:
            idx_ok = False
            continue
        for k, v in zip(want["indices"], want["values"]):
            worst = max(worst, abs(got[i][k] - v))
    case.update({"indices_exact": idx_ok, "max_abs_diff": worst, "tol": 1e-5,
                 "pass": idx_ok and worst <= 1e-5})
    record(case)

docs = [
    ("document /embed_sparse (no route)", "/embed_sparse", {"inputs": texts, "truncate": True}, False),
    ("document /embed_sparse prompt_name=document", "/embed_sparse",
     {"inputs": texts, "truncate": True, "prompt_name": "document"}, False),
    ("document /v1/embeddings sparse", "/v1/embeddings",
     {"input": texts, "sparse": True, "truncate": True}, True),
]
for name, route, body, openai in docs:
    body["model"] = "bert-splade-router"
    st, b = post(route, body)
    case = {"name": name, "status": st}
    if st != 200:
        case.update({"pass": False, "body": b}); record(case); continue
    got = parse(b, openai)
    ok, per = len(got) == len(texts), []
    for i, c in enumerate(g["cases"][:len(got)]):
        d, v = c["doc"], got[i]
        want = dict(zip(d["top_index"], d["values"]))
        gv = [v.get(k, 0.0) for k in want]
        wv = list(want.values())
        cos = sum(a * b for a, b in zip(gv, wv)) / (
            math.sqrt(sum(a * a for a in gv)) * math.sqrt(sum(b * b for b in wv)) or 1.0)
        missing = [k for k, x in want.items() if x >= 0.05 and v.get(k, 0.0) <= 0.0]
        diff = max(abs(v.get(k, 0.0) - x) for k, x in want.items())
        s = sum(v.values())
        rel_sum = abs(s - d["sum"]) / abs(d["sum"])
        nnz_diff = len([x for x in v.values() if x > 0]) - d["nnz"]
        # Entries well above the golden's 64th value that are not among its top 64.
        floor = min(wv) * 1.05 + 0.05
        extra = [k for k, x in v.items() if x > floor and k not in want]
        if backend == "cuda":  # bf16: the index set and the direction; the sum only recorded
            t_ok = not missing and not extra and cos >= 0.999
        else:
            t_ok = diff <= 1e-4 and rel_sum <= 1e-4 and abs(nnz_diff) <= d["near_zero"]
        per.append({"text": i, "cosine_top64": cos, "missing_ge_0.05": missing,
                    "extra_above_top64": extra,
                    "max_abs_diff_top64": diff, "sum": s, "golden_sum": d["sum"],
                    "rel_sum_diff": rel_sum, "nnz": d["nnz"] + nnz_diff, "golden_nnz": d["nnz"],
                    "pass": t_ok})
        ok = ok and t_ok
    case.update({"min_cosine": round(min(p["cosine_top64"] for p in per), 6),
                 "max_abs_diff": "%.2e" % max(p["max_abs_diff_top64"] for p in per),
                 "max_rel_sum_diff": "%.2e" % max(p["rel_sum_diff"] for p in per),
                 "per_text": per, "pass": ok})
    record(case)

# The classifier behind the same gateway.
gc = json.load(open("tests/fixtures/classify/golden_bert-cls.json", encoding="utf-8"))
ctexts = [c["text"] for c in gc["cases"] if "text" in c]
cwant = [c["probs"] for c in gc["cases"] if "text" in c]
st, b = post("/predict", {"inputs": [[t] for t in ctexts], "model": "bert-cls", "truncate": True})
case = {"name": "bert-cls /predict", "status": st}
if st != 200:
    case.update({"pass": False, "body": b})
else:
    sums = [sum(e["score"] for e in lst) for lst in b]
    labels = gc["labels"]
    diff = max(abs({e["label"]: e["score"] for e in lst}[labels[j]] - w[j])
               for lst, w in zip(b, cwant) for j in range(len(labels)))
    case.update({"inputs": len(b), "max_abs_sum_minus_1": "%.2e" % max(abs(s - 1) for s in sums),
                 "max_abs_diff_vs_golden": "%.2e" % diff,
                 "pass": len(b) == len(ctexts) and all(abs(s - 1) <= 1e-4 for s in sums)})
record(case)
json.dump(result, open(out, "w"), indent=1)
print("router:", "PASS" if result["pass"] else "FAIL")
sys.exit(0 if result["pass"] else 1)
PY
stop_serve

# --- 2. the start-up memory check.
SHARE_LINE=$(grep -m1 "models share a GPU" "$LOG" || true)
if [[ $BACKEND != cuda ]]; then
  say "memory: skipped (backend $BACKEND)"
  printf '{"backend": "%s", "skipped": true, "pass": true}\n' "$BACKEND" > "$D/memory.json"
else
  say "== memory: (a) the passing case's log line"
  a_ok=false; [[ -n $SHARE_LINE ]] && a_ok=true
  say "   ${SHARE_LINE:-no \"models share a GPU\" line in $LOG}"
  say "== memory: (b) 3 models x --replicas 64 (192 engines) must be refused"
  cp -r "$TMP/bert-cls" "$TMP/bert-cls-copy"
  RLOG="$D/refuse.log"
  t0=$(date +%s%N)
  set +e
  timeout 120 petal serve --backend cuda --listen 127.0.0.1:0 --shutdown-grace-ms 1000 \
    --replicas 64 --model "$TMP/bert-splade-router" --model "$TMP/bert-cls" \
    --model "$TMP/bert-cls-copy" --model-name bert-splade-router --model-name bert-cls \
    --model-name bert-cls-copy > "$RLOG" 2>&1
  refuse_rc=$?
  set -e
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  secs=$(printf "%d.%03d" $((ms / 1000)) $((ms % 1000)))
  REFUSE_LINE=$(grep -m1 "cannot serve these models together" "$RLOG" || true)
  b_ok=false
  if [[ $refuse_rc -ne 0 && $refuse_rc -ne 124 && -n $REFUSE_LINE ]] &&
      grep -q "bert-cls" <<< "$REFUSE_LINE" && grep -q "bert-splade-router" <<< "$REFUSE_LINE"; then
    b_ok=true
  fi
  say "   exit $refuse_rc after ${secs}s: ${REFUSE_LINE:-no refusal line; last lines:}"
  [[ -n $REFUSE_LINE ]] || tail -10 "$RLOG"
  "$PY" - "$D/memory.json" "$a_ok" "$SHARE_LINE" "$b_ok" "$refuse_rc" "$secs" "$REFUSE_LINE" <<'PY'
import json, sys
out, a_ok, a_line, b_ok, b_rc, secs, b_line = sys.argv[1:]
r = {"backend": "cuda", "skipped": False,
     "passing_case": {"log_line": a_line, "pass": a_ok == "true"},
     "refusing_case": {"models": 3, "replicas": 64, "engines": 192, "exit_code": int(b_rc),
                       "seconds": float(secs), "log_line": b_line, "pass": b_ok == "true"}}
r["pass"] = r["passing_case"]["pass"] and r["refusing_case"]["pass"]
json.dump(r, open(out, "w"), indent=1)
PY
  [[ $a_ok == true && $b_ok == true ]] || rc=1
  say "memory: $([[ $a_ok == true && $b_ok == true ]] && echo PASS || echo FAIL)"
fi
say "serve_checks: $([[ $rc == 0 ]] && echo PASS || echo FAIL) (results in $D)"
exit $rc
