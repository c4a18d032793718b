#!/usr/bin/env python3
"""Issue 31's throughput comparisons (GPU step `new_outputs`), one task and one side per call:
  petal      TASK --url http://HOST:PORT  requests through a running `petal serve`;
  reference  TASK                         the Python reference on the same GPU, bf16, in this
                                          process; with --petal-json it also compares its outputs
                                          with the sample Petal's run saved.
Tasks (texts of exactly 256 tokens with [CLS] and [SEP]: 254 single-token vocabulary words):
  sparse    100 texts per request, POST /embed_sparse   vs sentence-transformers SparseEncoder
  classify  100 texts per request, POST /predict        vs transformers pipeline("text-classification")
  colbert   1 query x 100 documents, POST /v1/score     vs a short torch ColBERT (BertModel + Dense
            projection + L2 norm + MaxSim, PyLate's input shaping)
Throughput is texts (documents) per second over --seconds of back-to-back requests: Petal with
1 client and with --clients clients, the reference as one process calling its batch API (batch 100)
in a loop. Writes one JSON per call (--out). Needs torch + transformers (+ sentence-transformers
for sparse) for `reference`; `petal` uses the standard library only.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_new_output_models import sample_texts  # noqa: E402

N_TEXTS = 100
SAMPLE = 16  # rows kept for the Petal-vs-reference comparison


def texts_for(model_dir, n=N_TEXTS, words=254, seed=11):
    from tokenizers import Tokenizer  # transformers' dependency; fast and version-stable

    class Vocab:  # sample_texts needs get_vocab() only
        def __init__(self, t):
            self.t = t

        def get_vocab(self):
            return self.t.get_vocab()

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_truncation()  # MiniLM's tokenizer.json truncates at 128
    tok.no_padding()
    texts = sample_texts(Vocab(tok), n, words, seed)
    lens = {len(tok.encode(t).ids) for t in texts}
    if lens != {words + 2}:
        raise SystemExit("texts are not %d tokens each: %s" % (words + 2, sorted(lens)))
    return texts


def query_for(model_dir):
    return texts_for(model_dir, n=1, words=12, seed=5)[0]


def request_for(task, model_dir):
    texts = texts_for(model_dir)
    if task == "sparse":
        return "/embed_sparse", {"inputs": texts, "truncate": True}
    if task == "classify":
        return "/predict", {"inputs": [[t] for t in texts], "truncate": True}  # TEI: a batch
    return "/v1/score", {"query": query_for(model_dir), "documents": texts}


# ---- Petal through HTTP ---------------------------------------------------------------------
def post(conn, path, body):
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError("%s answered %d: %s" % (path, r.status, data[:300]))
    return data, r.getheader("Server-Timing") or ""


def phases_of(header):
    """{"tokenize": 1.2, ...} (ms) from a Server-Timing header."""
    out = {}
    for part in header.split(","):
        name, _, dur = part.strip().partition(";dur=")
        if name and dur:
            out[name] = float(dur)
    return out


def run_clients(host, port, path, body, seconds, clients):
    stop = time.perf_counter() + seconds
    lat, errors, nbytes, phases = [], [], [0], {}
    lock = threading.Lock()

    def client():
        conn = http.client.HTTPConnection(host, port, timeout=120)
        mine = []
        try:
            while time.perf_counter() < stop:
                t = time.perf_counter()
                data, timing = post(conn, path, body)
                mine.append(time.perf_counter() - t)
                with lock:
                    nbytes[0] += len(data)
                    for k, v in phases_of(timing).items():
                        phases.setdefault(k, []).append(v)
        except Exception as e:  # noqa: BLE001 - reported, not raised, from a thread
            errors.append(repr(e))
        with lock:
            lat.extend(mine)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError("client errors: %s" % errors[:3])
    lat.sort()
    return {"clients": clients, "requests": len(lat), "seconds": wall,
            "texts_per_s": len(lat) * N_TEXTS / wall,
            "p50_ms": 1e3 * statistics.median(lat) if lat else None,
            "p99_ms": 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None,
            "response_bytes": nbytes[0] // max(1, len(lat)),
            "server_timing_p50_ms": {k: statistics.median(v) for k, v in sorted(phases.items())}}


def petal_side(a):
    host, port = a.url.replace("http://", "").split(":")
    port = int(port)
    path, req = request_for(a.task, a.model)
    body = json.dumps(req).encode()
    conn = http.client.HTTPConnection(host, port, timeout=300)
    t = time.perf_counter()
    answer = json.loads(post(conn, path, body)[0])  # first use: eager run, GEMM tuning
    first_s = time.perf_counter() - t
    for _ in range(a.warmup):  # second use captures the CUDA graphs; later ones replay
        post(conn, path, body)
    if a.task == "sparse":
        sample = answer[:SAMPLE]
        nnz = statistics.mean(len(r) for r in answer)
        shape = {"rows": len(answer), "mean_nonzeros": nnz}
    elif a.task == "classify":
        sample = answer[:SAMPLE]
        shape = {"rows": len(answer)}
    else:
        sample = [d["score"] for d in sorted(answer["data"], key=lambda d: d["index"])]
        shape = {"rows": len(sample)}
    print("petal %s: first request %.2f s, %s" % (a.task, first_s, shape), flush=True)
    runs = [run_clients(host, port, path, body, a.seconds, c) for c in (1, a.clients)]
    for r in runs:
        st = " ".join("%s %.2f" % kv for kv in r["server_timing_p50_ms"].items())
        print("petal %s, %d client(s): %.1f texts/s, p50 %.1f ms, %d B per answer; Server-Timing "
              "p50: %s" % (a.task, r["clients"], r["texts_per_s"], r["p50_ms"],
                           r["response_bytes"], st), flush=True)
    return {"side": "petal", "task": a.task, "first_request_s": first_s, "shape": shape,
            "runs": runs, "sample": sample}


# ---- references -----------------------------------------------------------------------------
def cuda_timed(fn, seconds, warmup):
    import torch
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        out = fn()
        sync()
        n += 1
    wall = time.perf_counter() - t0
    return out, {"clients": 1, "requests": n, "seconds": wall, "texts_per_s": n * N_TEXTS / wall}


def sparse_reference(a, texts, device):
    import torch
    from sentence_transformers import SparseEncoder
    model = SparseEncoder(a.model, device=device)
    model.to(torch.bfloat16)
    fn = lambda: model.encode(texts, batch_size=N_TEXTS, convert_to_tensor=True)  # noqa: E731
    out, run = cuda_timed(fn, a.seconds, a.warmup)
    dense = out.to_dense().float() if out.is_sparse else out.float()
    rows = dense[:SAMPLE].cpu()
    return run, {"rows": dense.shape[0], "mean_nonzeros": float((dense > 0).sum(1).float().mean())}, rows


def sparse_compare(ref_rows, petal_sample):
    import torch
    worst_cos, worst_jaccard = 1.0, 1.0
    for i, entries in enumerate(petal_sample):
        p = torch.zeros(ref_rows.shape[1])
        for e in entries:
            p[e["index"]] = e["value"]
        r = ref_rows[i]
        cos = float(torch.nn.functional.cosine_similarity(p, r, dim=0))
        a, b = set(torch.nonzero(p > 0).flatten().tolist()), set(torch.nonzero(r > 0).flatten().tolist())
        jac = len(a & b) / max(1, len(a | b))
        worst_cos, worst_jaccard = min(worst_cos, cos), min(worst_jaccard, jac)
    return {"worst_cosine": worst_cos, "worst_nonzero_jaccard": worst_jaccard}


def classify_reference(a, texts, device):
    import torch
    import transformers
    try:
        pipe = transformers.pipeline("text-classification", model=a.model, device=device,
                                     dtype=torch.bfloat16, top_k=None)
    except TypeError:  # older transformers: torch_dtype
        pipe = transformers.pipeline("text-classification", model=a.model, device=device,
                                     torch_dtype=torch.bfloat16, top_k=None)
    fn = lambda: pipe(texts, batch_size=N_TEXTS, truncation=True, max_length=256)  # noqa: E731
    out, run = cuda_timed(fn, a.seconds, a.warmup)
    probs = [{d["label"]: d["score"] for d in row} for row in out[:SAMPLE]]
    return run, {"rows": len(out)}, probs


def classify_compare(ref, petal_sample):
    worst, same = 0.0, 0
    for r, p in zip(ref, petal_sample):
        pp = {d["label"]: d["score"] for d in p}
        worst = max(worst, max(abs(pp[k] - v) for k, v in r.items()))
        same += max(pp, key=pp.get) == max(r, key=r.get)
    return {"worst_prob_diff": worst, "same_top_label": "%d/%d" % (same, len(ref))}


class TorchColbert:
    """ColBERT as PyLate runs it: [CLS] prefix text [SEP] (truncated at length - 1 before the
    prefix goes in), queries padded with [MASK] to query_length and not attended to, every token
    through the encoder and the Dense projection, L2-normalised; MaxSim = sum over query tokens of
    the best dot product with a document token (skiplist: punctuation, absent from these texts)."""

    def __init__(self, model_dir, device):
        import torch
        import transformers
        from safetensors.torch import load_file
        cfg = json.load(open(os.path.join(model_dir, "config_sentence_transformers.json")))
        self.tok = transformers.AutoTokenizer.from_pretrained(model_dir)
        self.enc = transformers.AutoModel.from_pretrained(model_dir, add_pooling_layer=False)
        self.enc = self.enc.to(device, torch.bfloat16).eval()
        w = load_file(os.path.join(model_dir, "1_Dense", "model.safetensors"))["linear.weight"]
        self.w = w.to(device, torch.bfloat16)
        self.qlen, self.dlen = cfg["query_length"], cfg["document_length"]
        self.qid = self.tok.convert_tokens_to_ids(cfg["query_prefix"])
        self.did = self.tok.convert_tokens_to_ids(cfg["document_prefix"])
        self.device = device

    def encode(self, texts, prefix, length, expand):
        import torch
        enc = self.tok(texts, truncation=True, max_length=length - 1, padding="longest",
                       return_tensors="pt")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        ids = torch.cat([ids[:, :1], torch.full_like(ids[:, :1], prefix), ids[:, 1:]], dim=1)
        mask = torch.cat([mask[:, :1], torch.ones_like(mask[:, :1]), mask[:, 1:]], dim=1)
        keep = mask.clone()
        if expand:  # pad with [MASK] to the query length: not attended to, but in the output
            pad = length - ids.shape[1]
            ids = torch.cat([ids, torch.full((ids.shape[0], pad), self.tok.mask_token_id)], dim=1)
            mask = torch.cat([mask, torch.zeros((mask.shape[0], pad), dtype=mask.dtype)], dim=1)
            keep = torch.ones_like(ids)
        ids, mask, keep = ids.to(self.device), mask.to(self.device), keep.to(self.device)
        with torch.inference_mode():
            h = self.enc(input_ids=ids, attention_mask=mask).last_hidden_state
            v = torch.nn.functional.normalize(h @ self.w.T, dim=-1)
        return v * keep[..., None]

    def score(self, query, docs):
        import torch
        q = self.encode([query], self.qid, self.qlen, True)[0]
        d = self.encode(docs, self.did, self.dlen, False)
        with torch.inference_mode():
            return torch.einsum("qh,bdh->bqd", q, d).max(-1).values.sum(-1).float()


def colbert_reference(a, texts, device):
    model = TorchColbert(a.model, device)
    query = query_for(a.model)
    out, run = cuda_timed(lambda: model.score(query, texts), a.seconds, a.warmup)
    return run, {"rows": int(out.shape[0])}, out.cpu().tolist()


def colbert_compare(ref, petal):
    worst = max(abs(p - r) / max(1e-6, abs(r)) for p, r in zip(petal, ref))
    top = lambda s: sorted(range(len(s)), key=lambda i: -s[i])[:10]  # noqa: E731
    return {"worst_rel_score_diff": worst,
            "top10_overlap": "%d/10" % len(set(top(ref)) & set(top(petal)))}


def reference_side(a):
    device = a.device
    texts = texts_for(a.model)
    fn = {"sparse": sparse_reference, "classify": classify_reference,
          "colbert": colbert_reference}[a.task]
    t = time.perf_counter()
    run, shape, sample = fn(a, texts, device)
    print("reference %s: %.1f texts/s (%d calls in %.1f s; set-up + runs %.1f s), %s"
          % (a.task, run["texts_per_s"], run["requests"], run["seconds"],
             time.perf_counter() - t, shape), flush=True)
    res = {"side": "reference", "task": a.task, "shape": shape, "runs": [run]}
    if a.petal_json and os.path.exists(a.petal_json):
        petal = json.load(open(a.petal_json))
        cmp = {"sparse": sparse_compare, "classify": classify_compare,
               "colbert": colbert_compare}[a.task]
        n = min(len(sample), len(petal["sample"]))
        res["agreement"] = cmp(sample[:n], petal["sample"][:n])
        print("agreement with petal:", res["agreement"], flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("side", choices=["petal", "reference"])
    ap.add_argument("task", choices=["sparse", "classify", "colbert"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--url", default="")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--petal-json", default="")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    res = petal_side(a) if a.side == "petal" else reference_side(a)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
