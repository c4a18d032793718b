#!/usr/bin/env python3
"""A loopback stand-in for the Hugging Face Hub's download endpoints, for tests without network.

Serves model repositories from a folder: ROOT/<org>/<name>/ holds a repo's files (symlinks are
followed, so real model folders can be linked in). ROOT/<org>/<name>.hub.json (optional, re-read
on every request so that a test can change it between steps) sets per-repo behaviour:
  "commit": 40-hex sha of the single commit (default: derived from the files)
  "refs": {"v1": "<commit>"}       extra revisions ("main" always points at the commit)
  "auth": "gated" | "private", "token": "..."   without `Authorization: Bearer <token>`:
      401 with X-Error-Code GatedRepo (gated) or RepoNotFound (private), as the Hub answers
  "cut": {"model.safetensors": 0.5}   the next "cut_times" (default 1) GETs of that file send
      that fraction of the bytes, then drop the connection
  "corrupt": ["model.safetensors"]   serve those bytes with one byte flipped (same size, same
      stated sha256: a verifying client must reject them)
  "lfs": ["tokenizer.json"]  files served as LFS in addition to *.safetensors
  "cdn_host": "..."          host name of the blob (CDN) URLs (default: "localhost" when the
      request came to 127.0.0.1, else "127.0.0.1": another host, as the Hub's CDN is)
Endpoints (as huggingface_hub calls them):
  GET  /api/models/<repo>/revision/<rev>           model info: sha, siblings
  GET  /api/models/<repo>/tree/<rev>[?recursive=]  file listing: oid, size, lfs {oid, size}
  HEAD|GET /<repo>/resolve/<rev>/<path>            small files: 200 with ETag = git blob sha1;
      LFS files: 302 to /_cdn/<sha256> with X-Linked-Etag = sha256 and X-Linked-Size
  HEAD|GET /_cdn/<sha256>                          the bytes; honours `Range: bytes=N-`
  GET  /_log[?clear=1]                             requests seen so far (JSON), for assertions
Usage: fake_hub.py --root DIR [--port 0] [--port-file FILE]; prints "PORT <n>" once listening.
"""
import argparse
import hashlib
import json
import os
import socket
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = []
LOG_LOCK = threading.Lock()
CUTS_DONE = {}


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, root, repo_id):
        self.id = repo_id
        self.dir = os.path.join(root, repo_id)
        cfg_path = self.dir + ".hub.json"
        self.cfg = {}
        if os.path.isfile(cfg_path):
            with open(cfg_path) as f:
                self.cfg = json.load(f)
        self.files = {}
        for base, dirs, names in os.walk(self.dir, followlinks=True):
            dirs.sort()
            for n in sorted(names):
                full = os.path.join(base, n)
                rel = os.path.relpath(full, self.dir).replace(os.sep, "/")
                self.files[rel] = full
        self.commit = self.cfg.get("commit") or hashlib.sha1(
            json.dumps(sorted(self.files)).encode() + self.id.encode()).hexdigest()

    def is_lfs(self, path):
        return path.endswith(".safetensors") or path in self.cfg.get("lfs", [])

    def revision(self, rev):
        if rev in ("main", self.commit):
            return self.commit
        return self.cfg.get("refs", {}).get(rev)

    def data(self, path):
        with open(self.files[path], "rb") as f:
            return f.read()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = "."
    blobs = {}  # sha256 -> (repo id, path), filled when a resolve answers with a redirect

    def log_message(self, fmt, *args):
        pass

    def record(self):
        with LOG_LOCK:
            LOG.append({"method": self.command, "path": self.path,
                        "range": self.headers.get("Range"),
                        "auth": self.headers.get("Authorization")})

    def send(self, status, body=b"", headers=None, ctype="application/json"):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code, message):
        self.send(status, json.dumps({"error": message}).encode(),
                  {"X-Error-Code": code, "X-Error-Message": message})

    def repo(self, org, name):
        if not os.path.isdir(os.path.join(self.root, org, name)):
            return None
        return Repo(self.root, org + "/" + name)

    def authorized(self, repo):
        mode = repo.cfg.get("auth")
        if not mode:
            return True
        if self.headers.get("Authorization") == "Bearer " + repo.cfg.get("token", ""):
            return True
        if mode == "gated":
            self.error(401, "GatedRepo", "Access to model %s is restricted." % repo.id)
        else:
            self.error(401, "RepoNotFound", "Repository not found")
        return False

    def do_HEAD(self):
        self.handle_any()

    def do_GET(self):
        self.handle_any()

    def handle_any(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        if parts[:1] == ["_log"]:
            with LOG_LOCK:
                body = json.dumps(LOG).encode()
                if "clear=1" in url.query:
                    LOG.clear()
            return self.send(200, body)
        self.record()
        if parts[:1] == ["_cdn"] and len(parts) == 2:
            return self.cdn(parts[1])
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("revision", "tree"):
            repo = self.repo(parts[2], parts[3])
            if repo is None:
                return self.error(404, "RepoNotFound", "Repository not found")
            if not self.authorized(repo):
                return
            commit = repo.revision(parts[5])
            if commit is None:
                return self.error(404, "RevisionNotFound", "Invalid rev id: " + parts[5])
            if parts[4] == "revision":
                return self.model_info(repo, commit)
            return self.tree(repo, "/".join(parts[6:]))
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = self.repo(parts[0], parts[1])
            if repo is None:
                return self.error(404, "RepoNotFound", "Repository not found")
            if not self.authorized(repo):
                return
            commit = repo.revision(parts[3])
            if commit is None:
                return self.error(404, "RevisionNotFound", "Invalid rev id: " + parts[3])
            return self.resolve(repo, commit, "/".join(parts[4:]))
        self.error(404, "NotFound", "no route")

    def model_info(self, repo, commit):
        info = {"_id": "0" * 24, "id": repo.id, "modelId": repo.id, "author": repo.id.split("/")[0],
                "sha": commit, "lastModified": "2024-01-01T00:00:00.000Z",
                "createdAt": "2024-01-01T00:00:00.000Z", "private": repo.cfg.get("auth") == "private",
                "gated": "auto" if repo.cfg.get("auth") == "gated" else False, "disabled": False,
                "downloads": 0, "likes": 0, "tags": [], "library_name": "sentence-transformers",
                "siblings": [{"rfilename": p} for p in repo.files]}
        self.send(200, json.dumps(info).encode())

    def tree(self, repo, under):
        out, dirs = [], set()
        for p in repo.files:
            if under and not p.startswith(under.rstrip("/") + "/"):
                continue
            d = os.path.dirname(p)
            while d and d not in dirs:
                dirs.add(d)
                out.append({"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(),
                            "size": 0, "path": d})
                d = os.path.dirname(d)
            data = repo.data(p)
            entry = {"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": p}
            if repo.is_lfs(p):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": 134}
            out.append(entry)
        self.send(200, json.dumps(out).encode())

    def resolve(self, repo, commit, path):
        if path not in repo.files:
            return self.error(404, "EntryNotFound", "%s does not exist at %s" % (path, commit))
        data = repo.data(path)
        if repo.is_lfs(path):
            sha = hashlib.sha256(data).hexdigest()
            Handler.blobs[sha] = (repo.id, path)
            # Another host name than the request's, as the Hub's CDN is: clients must not follow
            # it for metadata, nor send it their token.
            req_host = self.headers.get("Host", "").split(":")[0]
            host = repo.cfg.get("cdn_host") or ("localhost" if req_host == "127.0.0.1" else "127.0.0.1")
            port = self.server.server_address[1]
            loc = "http://%s:%d/_cdn/%s?repo=%s" % (host, port, sha, urllib.parse.quote(repo.id))
            return self.send(302, b"", {"Location": loc, "X-Repo-Commit": commit,
                                        "X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(len(data)),
                                        "ETag": '"%s"' % git_blob_sha1(b"pointer " + sha.encode())},
                             ctype="text/plain")
        self.send_bytes(repo, path, data, {"X-Repo-Commit": commit,
                                           "ETag": '"%s"' % git_blob_sha1(data)})

    def cdn(self, sha):
        if sha not in Handler.blobs:
            return self.error(404, "NotFound", "no such blob")
        repo_id, path = Handler.blobs[sha]
        repo = Repo(self.root, repo_id)
        self.send_bytes(repo, path, repo.data(path), {"ETag": '"%s"' % sha})

    def send_bytes(self, repo, path, data, headers):
        if path in repo.cfg.get("corrupt", []) and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
            if start >= len(data) and len(data) > 0:
                return self.send(416, b"", {"Content-Range": "bytes */%d" % len(data)})
            status = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, len(data) - 1, len(data))
        body = data[start:]
        headers["Accept-Ranges"] = "bytes"
        cut = repo.cfg.get("cut", {}).get(path)
        key = (repo.id, path)
        if self.command == "GET" and cut is not None and \
                CUTS_DONE.get(key, 0) < repo.cfg.get("cut_times", 1):
            CUTS_DONE[key] = CUTS_DONE.get(key, 0) + 1
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: int(len(data) * cut) - start if start < len(data) * cut else 0])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send(status, body, headers, ctype="application/octet-stream")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    args = ap.parse_args()
    Handler.root = os.path.abspath(args.root)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, args.port_file)
    print("PORT %d" % port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
