#!/usr/bin/env python3
"""GET /openapi.json against the OpenAPI 3.1 schema and against a real gateway.

Usage: openapi_test.py PETAL_BIN. Starts `petal serve` (CPU engine, all-MiniLM-L6-v2) with
--api-key, then checks: the document validates (openapi-spec-validator, pinned in
scripts/requirements.txt); every request example of every operation is answered with a status
whose response lists an example of the same name, and the body validates against that response's
schema; every operation without request examples (GET) answers 200 with a body valid against its
schema; operations with `security` answer 401 (an Error body and WWW-Authenticate) without the
key and the others do not; /docs and its files carry the Content-Security-Policy. Exits 77
(CTest's skip) without the validator package or the model.
"""
import json
import sys
import urllib.error
import urllib.request

from petal_proc import Checks, PetalServe, model_present, skip

KEY = "openapi-test-key"


def request(base, method, path, body=None, key=None):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers=headers, method=method.upper())
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def pointer(*parts):
    return "#/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def main():
    try:
        from openapi_spec_validator import validate
        import jsonschema
        import referencing
        from referencing.jsonschema import DRAFT202012
    except ImportError as e:
        return skip("%s (pip install -r scripts/requirements.txt)" % e)
    if not model_present():
        return skip("the MiniLM model is missing")
    check = Checks()

    serve = PetalServe(sys.argv[1], ["--api-key", KEY])
    try:
        status, headers, raw = request(serve.base, "get", "/openapi.json")
        check(status == 200, "/openapi.json without a key: %d" % status)
        doc = json.loads(raw)
        validate(doc)  # raises on an invalid document
        print("openapi-spec-validator: the document is valid OpenAPI %s" % doc["openapi"])
        registry = referencing.Registry().with_resource(
            "urn:petal-openapi", DRAFT202012.create_resource(doc))

        def resolve(obj):
            while "$ref" in obj:
                node = doc
                for p in obj["$ref"][2:].split("/"):
                    node = node[p.replace("~1", "/").replace("~0", "~")]
                obj = node
            return obj

        def body_matches(where, status_doc, path_parts, body_bytes, content_type):
            """Validates body_bytes against the schema of the response at path_parts."""
            content = status_doc.get("content", {})
            media = next((m for m in content if m.split(";")[0] == content_type.split(";")[0]), None)
            check(media is not None, "%s: content type %s not documented" % (where, content_type))
            if media is None or not media.startswith("application/json"):
                return
            schema = {"$ref": "urn:petal-openapi" + pointer(*path_parts, "content", media, "schema")}
            try:
                jsonschema.Draft202012Validator(schema, registry=registry).validate(json.loads(body_bytes))
            except jsonschema.ValidationError as e:
                check(False, "%s: body does not match its schema: %s" % (where, e.message))

        examples_sent = 0
        skipped = 0
        for path, item in doc["paths"].items():
            for method, op in item.items():
                responses = op["responses"]
                body_doc = op.get("requestBody", {}).get("content", {}).get("application/json", {})
                examples = body_doc.get("examples", {})
                # Examples that need another kind of model than the one served here (an
                # embedding model) say so with x-petal-requires; their shapes are checked by the
                # route's own tests (gateway_rerank_test for the ranking routes).
                skipped += sum(1 for ex in examples.values() if ex.get("x-petal-requires"))
                cases = [(name, ex["value"]) for name, ex in examples.items()
                         if not ex.get("x-petal-requires")] or [(None, None)]
                for name, value in cases:
                    where = "%s %s %s" % (method.upper(), path, name or "")
                    status, headers, raw = request(serve.base, method, path, value, KEY)
                    examples_sent += 1
                    code = str(status)
                    check(code in responses, "%s: status %s is not documented (%s)" % (where, code, raw[:200]))
                    if code not in responses:
                        continue
                    rdoc = responses[code]
                    if name is not None:
                        media = resolve(rdoc).get("content", {})
                        names = set()
                        for m in media.values():
                            names |= set(m.get("examples", {}))
                        check(name in names, "%s: answered %s, whose examples are %s" % (where, code, sorted(names)))
                    else:
                        check(status == 200, "%s: %d" % (where, status))
                    parts = ("paths", path, method, "responses", code)
                    while "$ref" in rdoc:  # a shared response: validate against its target
                        parts = tuple(p.replace("~1", "/") for p in rdoc["$ref"][2:].split("/"))
                        rdoc = resolve(rdoc)
                    body_matches(where, rdoc, parts, raw, headers.get("Content-Type", ""))
                # Auth as documented.
                needs_key = bool(op.get("security"))
                value = cases[0][1]
                status, headers, raw = request(serve.base, method, path, value, None)
                where = "%s %s without a key" % (method.upper(), path)
                if needs_key:
                    check(status == 401, "%s: %d" % (where, status))
                    check(headers.get("WWW-Authenticate") == "Bearer", "%s: WWW-Authenticate" % where)
                    body_matches(where, resolve(responses["401"]),
                                 ("components", "responses", "Unauthorized"), raw,
                                 headers.get("Content-Type", ""))
                else:
                    check(status != 401, "%s: 401 for a public route" % where)
        check(examples_sent >= 19, "only %d requests sent" % examples_sent)
        for path in ["/docs"] + doc["x-petal-assets"]["paths"]:
            status, headers, raw = request(serve.base, "get", path)
            csp = headers.get("Content-Security-Policy", "")
            check(status == 200 and len(raw) > 0, "%s: %d" % (path, status))
            check("default-src 'none'" in csp and "script-src 'self'" in csp, "%s: CSP %r" % (path, csp))
        print("%d requests from the document's examples (%d examples need another model: not sent)"
              % (examples_sent, skipped))
    finally:
        code = serve.stop()
    return check.finish(code)


if __name__ == "__main__":
    sys.exit(main())
