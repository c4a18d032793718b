#!/usr/bin/env python3
"""CI check of deploy/: every Kubernetes manifest validates against the official OpenAPI schemas
(kubernetes-validate, offline, strict: unknown fields fail), and the deployment's own rules hold:
GPU servers ask for one GPU each and have gRPC probes, gateways have /ready and /health probes
and Prometheus annotations and name every server pod, the kustomization lists every manifest,
and the Dockerfile is multi-stage (CUDA devel -> CUDA runtime).
Exit 77 (CTest: skipped) when kubernetes-validate or PyYAML is missing (scripts/setup.sh installs
both into .venv).
"""
import os
import sys

try:
    import kubernetes_validate
    import yaml
except ImportError as e:
    print(f"skipped: {e} (pip install -r scripts/requirements.txt)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.path.join(ROOT, "deploy", "k8s")
K8S_VERSION = "1.30.0"  # oldest version we claim: gRPC probes are GA since 1.27
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def container(obj):
    return obj["spec"]["template"]["spec"]["containers"][0]


docs = {}
files = sorted(f for f in os.listdir(K8S) if f.endswith(".yaml") and f != "kustomization.yaml")
# deploy/k8s/jobs/: applied by hand (kubectl apply -f), not listed in the kustomization.
JOBS = os.path.join(K8S, "jobs")
job_files = sorted(os.path.join("jobs", f) for f in os.listdir(JOBS) if f.endswith(".yaml"))
for f in files + job_files:
    for d in yaml.safe_load_all(open(os.path.join(K8S, f))):
        if not d:
            continue
        try:
            kubernetes_validate.validate(d, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            failures.append(f"{f}: {d['kind']}/{d['metadata']['name']}: {e.message} at {list(e.path)}")
        except kubernetes_validate.SchemaNotFoundError as e:
            failures.append(f"{f}: no schema: {e}")
        check(d["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "petal",
              f"{f}: {d['kind']} without label app.kubernetes.io/name=petal")
        docs[(d["kind"], d["metadata"]["name"])] = d

kust = yaml.safe_load(open(os.path.join(K8S, "kustomization.yaml")))
check(sorted(kust.get("resources", [])) == files, f"kustomization.yaml lists {kust.get('resources')}, files are {files}")

server = docs.get(("StatefulSet", "petal-server"))
gateway = docs.get(("Deployment", "petal-gateway"))
check(server is not None, "no StatefulSet petal-server")
check(gateway is not None, "no Deployment petal-gateway")
check(("Service", "petal-gateway") in docs, "no Service petal-gateway")
headless = docs.get(("Service", "petal-server"))
check(headless is not None and headless["spec"].get("clusterIP") == "None", "Service petal-server must be headless")
if server:
    c = container(server)
    check(str(c["resources"]["limits"].get("nvidia.com/gpu")) == "1", "server: limits nvidia.com/gpu must be 1")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check("grpc" in c.get(probe, {}), f"server: {probe} must be a gRPC probe")
    for probe in ("startupProbe", "readinessProbe"):
        check(c.get(probe, {}).get("grpc", {}).get("service") == "petal.v1.Embedder",
              f"server: {probe} must ask for service petal.v1.Embedder (\"\" is SERVING early)")
    check(c["args"][0] == "server", "server: container must run `petal server`")
    check(server["spec"]["serviceName"] == "petal-server", "server: serviceName must be petal-server")
if gateway:
    c = container(gateway)
    check(c.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/ready", "gateway: readiness on /ready")
    check(c.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/health", "gateway: liveness on /health")
    ann = gateway["spec"]["template"]["metadata"].get("annotations", {})
    check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/path") == "/metrics",
          "gateway: Prometheus scrape annotations")
    check(c["args"][0] == "gateway", "gateway: container must run `petal gateway`")
    if server:
        want = [f"--server=petal-server-{i}.petal-server:50051" for i in range(server["spec"]["replicas"])]
        got = [a for a in c["args"] if a.startswith("--server")]
        check(got == want, f"gateway: --server list {got} does not match the server replicas {want}")

embed = docs.get(("Job", "petal-embed"))
check(embed is not None, "no Job petal-embed in deploy/k8s/jobs/")
if embed:
    spec = embed["spec"]
    c = container(embed)
    n = spec.get("completions")
    check(spec.get("completionMode") == "Indexed", "embed job: completionMode must be Indexed")
    check(spec.get("parallelism") == n, "embed job: parallelism must equal completions")
    check(str(c["resources"]["limits"].get("nvidia.com/gpu")) == "1", "embed job: one GPU per pod")
    check(c["args"][0] == "embed", "embed job: container must run `petal embed`")
    check(f"--shard=$(JOB_COMPLETION_INDEX)/{n}" in c["args"],
          f"embed job: --shard=$(JOB_COMPLETION_INDEX)/{n} must match completions")
    check("--resume" in c["args"], "embed job: retried pods must --resume")
    outs = [a for a in c["args"] if a.startswith("--output=")]
    check(len(outs) == 1 and "$(JOB_COMPLETION_INDEX)" in outs[0], "embed job: one output per shard")
    env = {e["name"]: e for e in c.get("env", [])}
    check("JOB_COMPLETION_INDEX" in env, "embed job: JOB_COMPLETION_INDEX declared in env for $(...)")
    check(embed["spec"]["template"]["spec"]["restartPolicy"] == "Never", "embed job: restartPolicy Never")

froms = [l.split()[1] for l in open(os.path.join(ROOT, "deploy", "Dockerfile")) if l.startswith("FROM ")]
check(len(froms) == 2 and "devel" in froms[0] and "runtime" in froms[1],
      f"Dockerfile: expected a devel build stage and a runtime stage, got {froms}")

for f in failures:
    print("FAIL", f)
print(f"deploy/: {len(docs)} resources in {len(files)} manifests checked against Kubernetes {K8S_VERSION}: "
      f"{'OK' if not failures else str(len(failures)) + ' problem(s)'}")
sys.exit(1 if failures else 0)
