"""A minimal FHIR R4 create endpoint for benchmarks where Medplum's router (server.mjs) cannot
serve: it answers a conditional create from an index of the identifiers it holds, in constant
time, where Medplum's in-memory router searches every resource it holds (so its answer slows
as it fills: about 0.14 s a create over its first 500 resources, 0.37 s over the next 500,
on the 2-core build machine), and it needs only python3 (no node, no packages).

    python3 tests/fhir_peer/indexed.py PORT DIR [TOKEN]

The same command line and files as server.mjs: listens on 127.0.0.1:PORT (0: any free port,
written to DIR/port) under /fhir/R4; every resource it creates is appended to DIR/store.jsonl
(and read back at start); every write is appended to DIR/requests.jsonl as {"method", "path",
"if_none_exist", "status"} before it is answered; with TOKEN a request without
"Authorization: Bearer TOKEN" gets 401. It answers POST {base}/TYPE with If-None-Exist:
identifier=SYSTEM|VALUE as a FHIR server does (201 with the resource, its id and meta set; 200
with the one it holds when the identifier is known) and a POST whose body is not a JSON resource
of that type, or has no identifier, with 400 and an OperationOutcome. It validates nothing
else against the R4 definitions (Medplum does): what the link sends is checked by
tests/fhir_link.rs against Medplum, not here.
"""

import asyncio
import json
import os
import sys
import urllib.parse


def outcome(code, text):
    return {"resourceType": "OperationOutcome", "issue": [{"severity": "error", "code": code, "details": {"text": text}}]}


def main():
    port, folder = int(sys.argv[1]), sys.argv[2]
    token = sys.argv[3] if len(sys.argv) > 3 else None
    store_path = os.path.join(folder, "store.jsonl")
    held = {}
    if os.path.exists(store_path):
        with open(store_path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    ident = r["identifier"][0]
                    held[(ident.get("system"), ident.get("value"))] = r
    store = open(store_path, "a")
    requests = open(os.path.join(folder, "requests.jsonl"), "a")
    counter = [len(held)]

    def write(method, path, headers, body):
        if token and headers.get("authorization") != f"Bearer {token}":
            return 401, outcome("login", "no valid bearer token")
        if method != "POST":
            return 405, outcome("not-supported", f"{method} is not served here")
        kind = path.rstrip("/").rsplit("/", 1)[-1]
        try:
            resource = json.loads(body)
            ident = resource["identifier"][0]
            key = (ident["system"], ident["value"])
        except (ValueError, KeyError, IndexError, TypeError):
            return 400, outcome("invalid", "not a resource with an identifier")
        if resource.get("resourceType") != kind:
            return 400, outcome("invalid", f"resourceType is not {kind}")
        cond = headers.get("if-none-exist")
        if cond:
            name, _, value = cond.partition("=")
            system, _, val = urllib.parse.unquote(value).partition("|")
            if name != "identifier":
                return 400, outcome("not-supported", "only identifier= is searched")
            found = (system, val.replace("\\,", ",").replace("\\|", "|").replace("\\$", "$").replace("\\\\", "\\"))
            if found in held:
                return 200, held[found]
        counter[0] += 1
        resource["id"] = str(counter[0])
        resource["meta"] = {"versionId": "1"}
        held[key] = resource
        store.write(json.dumps(resource) + "\n")
        store.flush()
        return 201, resource

    async def serve_one(reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status, out = write(method, path, headers, body.decode("utf-8", "replace"))
                if method != "GET":
                    requests.write(
                        json.dumps({"method": method, "path": path, "if_none_exist": headers.get("if-none-exist"), "status": status})
                        + "\n"
                    )
                    requests.flush()
                text = json.dumps(out).encode()
                reason = {200: "OK", 201: "Created", 400: "Bad Request", 401: "Unauthorized", 405: "Method Not Allowed"}[status]
                writer.write(
                    f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/fhir+json\r\ncontent-length: {len(text)}\r\n\r\n".encode()
                    + text
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def serve():
        server = await asyncio.start_server(serve_one, "127.0.0.1", port)
        tmp = os.path.join(folder, "port.tmp")
        with open(tmp, "w") as f:
            f.write(str(server.sockets[0].getsockname()[1]))
        os.replace(tmp, os.path.join(folder, "port"))
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
