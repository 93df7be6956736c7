#!/usr/bin/python3
"""A fake Kubernetes API server for the scheduler's Pod watch tests.

Serves, over HTTPS (a certificate the test makes with openssl) and with a
bearer-token check:
  GET /api/v1/pods?fieldSelector=spec.nodeName%3D<node>[&limit=N&continue=C]
      LIST (a PodList; pages when limit is given)
  GET /api/v1/pods?...&watch=1&resourceVersion=RV&allowWatchBookmarks=true
      WATCH: chunked, newline-delimited JSON events from RV on
Pods are changed by commands, one JSON object per line, written to the
control FIFO (--ctl):
  {"op":"add","pod":{"uid","name","namespace","node","annotations",
                     "containers","initContainers"}}  (containers with
      "resources" carry e.g. nvshare.com/gpu-memory limits)
  {"op":"modify","uid":U,"annotations":{...},"split":bool,"silent":bool}
      (split: the event goes out in 3 chunks 30 ms apart; silent: change
      the Pod with no event, as if the watch missed it)
  {"op":"delete","uid":U,"silent":bool}
  {"op":"bookmark"}             BOOKMARK with the current resourceVersion
  {"op":"error410"}             ERROR event (Status code 410) and end
  {"op":"gone_next","n":1}      the next n WATCH requests get HTTP 410
  {"op":"close"}                drop every watch connection mid-stream
  {"op":"token","value":T}      accept only token T from now on
  {"op":"garbage"}              a malformed line in the watch stream
Dynamic Resource Allocation (resource.k8s.io/v1, for nvshare-dra-plugin):
  GET    /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims/NAME
  GET    /apis/resource.k8s.io/v1/resourceslices[?fieldSelector=spec.driver=D,spec.nodeName=N]
  GET|PUT|DELETE /apis/resource.k8s.io/v1/resourceslices/NAME, POST .../resourceslices
ResourceSlices are checked as the API server would (names, pool, devices,
a resourceVersion that must match on PUT: 409 otherwise) and stored with
quantities in canonical form ("16384Mi" comes back as "16Gi"); every
change rewrites --slices-file (a JSON object name -> slice). Commands:
  {"op":"claim","claim":{...}}  add or replace a ResourceClaim (the whole object)
  {"op":"claim_delete","namespace":NS,"name":N}
  {"op":"slice","slice":{...}}  a ResourceSlice someone else made
  {"op":"slice_delete","name":N}  someone else deletes a slice
  {"op":"fail","match":S,"code":C,"n":N}  the next N requests whose path
      contains S get HTTP C (a Status); "code":0 drops the connection;
      "n":0 ends an earlier failure for S
  {"op":"bulk_modify","n":K}    MODIFIED events for the first K bulk Pods
With --bulk N --bulk-bytes B the node also has N Pods "bulk-00000"...
(uids 00000000-0000-4000-8000-<12 digits>) of about B bytes each, nearly
all of it one annotation, written to the socket piece by piece from one
shared blob (a LIST of 5,000 Pods of 1.5 MiB is 7.5 GB: never built).
--plain serves HTTP instead of HTTPS (no TLS cost for such a LIST).
Every request and every event sent is printed to stdout as
"<CLOCK_MONOTONIC us> WHAT ..." (the clock fake_client prints too).
"""
import argparse
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Condition()
pods = {}  # uid -> pod dict (the Kubernetes object)
history = []  # (rv int, event dict) for watches from an older RV
rv = 1000
token = None
gone_next = 0
generation = 0  # bumped by "close": watches of older generations drop
out_lock = threading.Lock()
claims = {}  # (namespace, name) -> ResourceClaim
slices = {}  # name -> ResourceSlice
slices_file = None
failures = []  # [match, code, n] (resource.k8s.io requests)
RES = "/apis/resource.k8s.io/v1"
bulk_n = 0
bulk_blob = b""


def bulk_uid(i):
    return "00000000-0000-4000-8000-%012d" % i


def bulk_parts(i, cur_rv):
    """(head, tail) of bulk Pod i's JSON around the shared blob."""
    o = {"kind": "Pod", "apiVersion": "v1",
         "metadata": {"name": "bulk-%05d" % i, "namespace": "bulk", "uid": bulk_uid(i),
                      "resourceVersion": str(cur_rv),
                      "annotations": {"example.com/blob": "@@BLOB@@",
                                      "nvshare.com/gpu-core-limit": "30"}},
         "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]},
         "status": {"phase": "Running"}}
    head, tail = json.dumps(o).encode().split(b"@@BLOB@@")
    return head, tail


def now_us():
    return time.monotonic_ns() // 1000


def log(*a):
    with out_lock:
        print(now_us(), *a, flush=True)


def spec_of(p):
    """containers / initContainers as given (to carry resources), else one."""
    spec = {"nodeName": p.get("node", "node-1"),
            "containers": p.get("containers") or [{"name": "c", "image": "x"}]}
    if p.get("initContainers"):
        spec["initContainers"] = p["initContainers"]
    return spec


def make_pod(p):
    global rv
    rv += 1
    ann = dict(p.get("annotations") or {})
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": p["name"],
            "namespace": p.get("namespace", "default"),
            "uid": p["uid"],
            "resourceVersion": str(rv),
            "annotations": ann,
            "labels": {"app": p["name"]},
        },
        "spec": spec_of(p),
        "status": {"phase": "Running"},
    }


def emit(kind, obj, split=False):
    """Queues an event for every watch (caller holds lock)."""
    ev = {"type": kind, "object": obj}
    history.append((rv, ev, split))
    lock.notify_all()


def node_of(pod):
    return pod["spec"]["nodeName"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def status(self, code, reason, message):
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "message": message, "reason": reason, "code": code}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.resource("POST", urllib.parse.urlsplit(self.path), {})

    def do_PUT(self):
        self.resource("PUT", urllib.parse.urlsplit(self.path), {})

    def do_DELETE(self):
        self.resource("DELETE", urllib.parse.urlsplit(self.path), {})

    def resource(self, method, u, q):
        """resource.k8s.io/v1: claims (read) and slices (read, write)."""
        n = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(n) if n else b""
        with lock:
            tok = token
            fail = None
            for f in failures:
                if f[0] in u.path and f[2] > 0:
                    f[2] -= 1
                    fail = f[1]
                    break
        if self.headers.get("Authorization", "") != "Bearer " + tok:
            log("REQ", method, "401", u.path)
            return self.status(401, "Unauthorized", "Unauthorized")
        if fail is not None:
            log("REQ", method, "FAIL", fail, u.path)
            if fail == 0:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            return self.status(fail, "InternalError", "injected failure %d" % fail)
        m = re.fullmatch(RES + r"/namespaces/([^/]+)/resourceclaims/([^/]+)", u.path)
        if m and method == "GET":
            with lock:
                c = claims.get((m.group(1), m.group(2)))
            if c is None:
                log("REQ CLAIM GET 404", m.group(1) + "/" + m.group(2))
                return self.status(404, "NotFound", 'resourceclaims.resource.k8s.io "%s" not found'
                                   % m.group(2))
            log("REQ CLAIM GET 200", m.group(1) + "/" + m.group(2))
            return self.send_json(200, c)
        m = re.fullmatch(RES + r"/resourceslices(?:/([^/]+))?", u.path)
        if not m:
            log("REQ", method, "404", u.path)
            return self.status(404, "NotFound", "no such path")
        name = m.group(1)
        try:
            obj = json.loads(body) if body else None
        except ValueError:
            log("REQ SLICE", method, "400 not JSON")
            return self.status(400, "BadRequest", "not JSON")
        with lock:
            code, out = slice_op(method, name, obj, q)
        log("REQ SLICE", method, code, name or (obj or {}).get("metadata", {}).get("name", "-"),
            out.get("message", "") if out.get("kind") == "Status" else "")
        return self.send_json(code, out)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        global gone_next
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        auth = self.headers.get("Authorization", "")
        watch = q.get("watch", ["0"])[0] in ("1", "true")
        what = "WATCH" if watch else "LIST"
        if u.path.startswith(RES + "/"):
            return self.resource("GET", u, q)
        if u.path != "/api/v1/pods":
            log("REQ", what, "404", u.path)
            return self.status(404, "NotFound", "no such path")
        with lock:
            tok = token
        if auth != "Bearer " + tok:
            log("REQ", what, "401", "token=" + auth.replace("Bearer ", "")[:16])
            return self.status(401, "Unauthorized", "Unauthorized")
        sel = q.get("fieldSelector", [""])[0]
        if not sel.startswith("spec.nodeName="):
            log("REQ", what, "400", "fieldSelector=" + sel)
            return self.status(400, "BadRequest", "this fake wants a node field selector")
        node = sel.split("=", 1)[1]
        if watch:
            return self.watch(q, node)
        with lock:
            items = [(p["metadata"]["name"], p) for p in pods.values() if node_of(p) == node]
            if node == "node-1":
                items += [("bulk-%05d" % i, i) for i in range(bulk_n)]
            items.sort(key=lambda t: t[0])
            cur = rv
        limit = int(q.get("limit", ["0"])[0] or 0)
        start = int(q.get("continue", ["0"])[0] or 0)
        page = items[start:start + limit] if limit else items
        cont = str(start + limit) if limit and start + limit < len(items) else ""
        # The body in pieces (a bulk Pod's blob is never copied).
        parts = [json.dumps({"kind": "PodList", "apiVersion": "v1",
                             "metadata": {"resourceVersion": str(cur), "continue": cont}}
                            ).encode()[:-1] + b',"items":[']
        for k, (_, p) in enumerate(page):
            if k:
                parts.append(b",")
            if isinstance(p, int):
                head, tail = bulk_parts(p, cur)
                parts += [head, bulk_blob, tail]
            else:
                parts.append(json.dumps(p).encode())
        parts.append(b"]}")
        log("REQ LIST 200 node=%s items=%d rv=%d continue=%s" % (node, len(page), cur, cont or "-"))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(sum(len(x) for x in parts)))
        self.end_headers()
        try:
            for x in parts:
                self.wfile.write(x)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError) as e:
            log("LIST write failed:", type(e).__name__)
            self.close_connection = True

    def watch(self, q, node):
        global gone_next
        since = q.get("resourceVersion", [""])[0]
        timeout = float(q.get("timeoutSeconds", ["300"])[0])
        with lock:
            if gone_next > 0:
                gone_next -= 1
                log("REQ WATCH 410 rv=" + since)
                return self.status(410, "Expired", "too old resource version: %s" % since)
            gen = generation
            try:
                pos = next(i for i, (r, _, _) in enumerate(history) if r > int(since))
            except StopIteration:
                pos = len(history)
        log("REQ WATCH 200 rv=%s bookmarks=%s" % (since, q.get("allowWatchBookmarks", [""])[0]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        end = time.monotonic() + timeout
        try:
            while True:
                with lock:
                    while pos >= len(history) and generation == gen and time.monotonic() < end:
                        lock.wait(min(0.2, max(0.0, end - time.monotonic())))
                    if generation != gen:
                        log("CLOSE watch (no final chunk)")
                        self.close_connection = True
                        try:
                            self.connection.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                        return
                    if pos >= len(history):
                        break
                    r, ev, split = history[pos]
                    pos += 1
                if ev.get("_node") and ev["_node"] != node:
                    continue
                line = ev.get("_raw")
                if "_bulk" in ev:
                    head, tail = bulk_parts(ev["_bulk"], r)
                    line = b'{"type":"MODIFIED","object":' + head + bulk_blob + tail + b"}\n"
                    log("SENT MODIFIED uid=%s rv=%d bytes=%d" % (bulk_uid(ev["_bulk"]), r, len(line)))
                    self.chunk(line)
                    continue
                if line is None:
                    o = ev["object"]
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED") and node_of(o) != node:
                        continue
                    line = json.dumps({"type": ev["type"], "object": o}).encode() + b"\n"
                desc = ev["type"]
                if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    desc += " uid=" + ev["object"]["metadata"]["uid"]
                log("SENT", desc, "rv=%d" % r, "split" if split else "")
                if split:
                    a, b = len(line) // 3, 2 * len(line) // 3
                    for part in (line[:a], line[a:b], line[b:]):
                        self.chunk(part)
                        time.sleep(0.03)
                else:
                    self.chunk(line)
                if ev["type"] == "ERROR":
                    break
            self.chunk(b"")
            log("END watch")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError) as e:
            log("WATCH write failed:", type(e).__name__)
            self.close_connection = True


def status_obj(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}


def canonical(q):
    """A quantity as the API server writes it back: "16384Mi" -> "16Gi"."""
    m = re.fullmatch(r"([0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei)?", str(q))
    if not m:
        return q
    units = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
    v, i = int(m.group(1)), units.index(m.group(2) or "")
    if i == 0:
        return str(v)
    while v and v % 1024 == 0 and i < len(units) - 1:
        v, i = v // 1024, i + 1
    return "%d%s" % (v, units[i])


DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUB = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def check_slice(o):
    """What the API server's validation would say (the parts nvshare uses)."""
    if o.get("apiVersion") != "resource.k8s.io/v1" or o.get("kind") != "ResourceSlice":
        return "apiVersion/kind must be resource.k8s.io/v1 ResourceSlice"
    name = o.get("metadata", {}).get("name", "")
    if not DNS_SUB.fullmatch(name):
        return "metadata.name %r is not a DNS subdomain" % name
    sp = o.get("spec", {})
    if not DNS_SUB.fullmatch(sp.get("driver", "")) or len(sp.get("driver", "")) > 63:
        return "spec.driver %r" % sp.get("driver")
    pool = sp.get("pool", {})
    if not isinstance(pool.get("generation"), int) or pool.get("resourceSliceCount") != 1 \
            or not pool.get("name"):
        return "spec.pool needs name, an integer generation and resourceSliceCount"
    if not sp.get("nodeName"):
        return "spec.nodeName is required here"
    seen = set()
    for d in sp.get("devices", []):
        n = d.get("name", "")
        if not DNS_LABEL.fullmatch(n) or n in seen:
            return "device name %r invalid or repeated" % n
        seen.add(n)
        attrs, caps = d.get("attributes", {}), d.get("capacity", {})
        if len(attrs) + len(caps) > 32 or set(attrs) & set(caps):
            return "device %s: attributes and capacity" % n
        for k, a in attrs.items():
            if len(a) != 1 or list(a)[0] not in ("int", "bool", "string", "version"):
                return "device %s attribute %s: exactly one of int, bool, string, version" % (n, k)
        for k, c in caps.items():
            if "value" not in c:
                return "device %s capacity %s: value required" % (n, k)
        if caps and any("requestPolicy" in c for c in caps.values()) \
                and d.get("allowMultipleAllocations") is not True:
            return "device %s: requestPolicy needs allowMultipleAllocations" % n
    return None


def canonical_slice(o):
    o = json.loads(json.dumps(o))
    for d in o.get("spec", {}).get("devices", []):
        for c in d.get("capacity", {}).values():
            c["value"] = canonical(c["value"])
            rp = c.get("requestPolicy")
            if rp:
                for k in ("default",):
                    if k in rp:
                        rp[k] = canonical(rp[k])
                for k in ("min", "max", "step"):
                    if k in rp.get("validRange", {}):
                        rp["validRange"][k] = canonical(rp["validRange"][k])
    return o


def save_slices():
    if not slices_file:
        return
    tmp = slices_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(slices, f)
    os.rename(tmp, slices_file)


def slice_op(method, name, obj, q):
    """One ResourceSlice request (lock held): (HTTP code, body)."""
    global rv
    if method == "GET" and name is None:
        sel = dict(x.split("=", 1) for x in q.get("fieldSelector", [""])[0].split(",") if "=" in x)
        items = [o for o in slices.values()
                 if all((k == "spec.driver" and o["spec"]["driver"] == v)
                        or (k == "spec.nodeName" and o["spec"].get("nodeName") == v)
                        for k, v in sel.items())]
        return 200, {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                     "metadata": {"resourceVersion": str(rv)}, "items": items}
    if method == "GET":
        if name not in slices:
            return 404, status_obj(404, "NotFound", 'resourceslices.resource.k8s.io "%s" not found' % name)
        return 200, slices[name]
    if method == "DELETE":
        if slices.pop(name, None) is None:
            return 404, status_obj(404, "NotFound", 'resourceslices.resource.k8s.io "%s" not found' % name)
        save_slices()
        return 200, status_obj(200, "", "deleted")
    if not isinstance(obj, dict):
        return 400, status_obj(400, "BadRequest", "no object")
    why = check_slice(obj)
    if why:
        return 422, status_obj(422, "Invalid", "ResourceSlice is invalid: " + why)
    oname = obj["metadata"]["name"]
    if method == "POST":
        if name is not None:
            return 405, status_obj(405, "MethodNotAllowed", "POST to a name")
        if oname in slices:
            return 409, status_obj(409, "AlreadyExists",
                                   'resourceslices.resource.k8s.io "%s" already exists' % oname)
        if obj["metadata"].get("resourceVersion"):
            return 400, status_obj(400, "BadRequest", "resourceVersion must not be set on create")
    else:  # PUT
        if name != oname:
            return 400, status_obj(400, "BadRequest", "name in the path and the object differ")
        if name not in slices:
            return 404, status_obj(404, "NotFound", 'resourceslices.resource.k8s.io "%s" not found' % name)
        if obj["metadata"].get("resourceVersion") != slices[name]["metadata"]["resourceVersion"]:
            return 409, status_obj(409, "Conflict", "the object has been modified; please apply "
                                   "your changes to the latest version and try again")
    rv += 1
    o = canonical_slice(obj)
    o["metadata"]["resourceVersion"] = str(rv)
    o["metadata"].setdefault("uid", "5l1ce000-0000-4000-8000-%012d" % rv)
    slices[oname] = o
    save_slices()
    return (201 if method == "POST" else 200), o


def control(path):
    global rv, token, gone_next, generation
    f = open(path, "r")  # the test holds it open for writing
    while True:
        line = f.readline()
        if not line:
            time.sleep(0.05)
            continue
        line = line.strip()
        if not line:
            continue
        try:
            c = json.loads(line)
        except ValueError:
            log("CTL bad", line)
            continue
        op = c.get("op")
        with lock:
            if op == "add":
                p = make_pod(c["pod"])
                if c["pod"].get("mirror"):
                    p["metadata"]["annotations"]["kubernetes.io/config.mirror"] = c["pod"]["mirror"]
                pods[p["metadata"]["uid"]] = p
                if not c.get("silent"):
                    emit("ADDED", p)
            elif op == "modify":
                old = pods[c["uid"]]
                p = json.loads(json.dumps(old))
                rv += 1
                p["metadata"]["resourceVersion"] = str(rv)
                ann = {k: v for k, v in old["metadata"]["annotations"].items()
                       if k == "kubernetes.io/config.mirror"}
                ann.update(c.get("annotations") or {})
                p["metadata"]["annotations"] = ann
                pods[c["uid"]] = p
                if not c.get("silent"):
                    emit("MODIFIED", p, bool(c.get("split")))
            elif op == "delete":
                p = pods.pop(c["uid"])
                rv += 1
                p = json.loads(json.dumps(p))
                p["metadata"]["resourceVersion"] = str(rv)
                if not c.get("silent"):
                    emit("DELETED", p)
            elif op == "bookmark":
                rv += 1
                emit("BOOKMARK", {"kind": "Pod", "apiVersion": "v1",
                                  "metadata": {"resourceVersion": str(rv)}})
            elif op == "error410":
                history.append((rv, {"type": "ERROR", "object": {
                    "kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "too old resource version: 1 (%d)" % rv,
                    "reason": "Expired", "code": 410}}, False))
                lock.notify_all()
            elif op == "garbage":
                history.append((rv, {"type": "GARBAGE", "_raw": b'{"type":"MODIFIED","object":[1,2\n'}, False))
                lock.notify_all()
            elif op == "bulk_modify":
                for i in range(min(int(c.get("n", 1)), bulk_n)):
                    rv += 1
                    history.append((rv, {"type": "MODIFIED", "_bulk": i}, False))
                lock.notify_all()
            elif op == "gone_next":
                gone_next = int(c.get("n", 1))
            elif op == "close":
                generation += 1
                lock.notify_all()
            elif op == "token":
                token = c["value"]
            elif op == "claim":
                cl = c["claim"]
                claims[(cl["metadata"]["namespace"], cl["metadata"]["name"])] = cl
            elif op == "claim_delete":
                claims.pop((c["namespace"], c["name"]), None)
            elif op == "slice":
                rv += 1
                o = canonical_slice(c["slice"])
                o["metadata"]["resourceVersion"] = str(rv)
                slices[o["metadata"]["name"]] = o
                save_slices()
            elif op == "slice_delete":
                slices.pop(c["name"], None)
                save_slices()
            elif op == "fail":
                failures[:] = [f for f in failures if f[0] != c["match"]]
                if int(c.get("n", 1)) > 0:
                    failures.append([c["match"], int(c.get("code", 500)), int(c.get("n", 1))])
        log("CTL", op, c.get("uid", ""))


def main():
    global token, slices_file, bulk_n, bulk_blob
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--plain", action="store_true", help="HTTP, no TLS")
    ap.add_argument("--bulk", type=int, default=0, help="bulk Pods on node-1")
    ap.add_argument("--bulk-bytes", type=int, default=0, help="size of each")
    ap.add_argument("--token", required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--pods", help="JSON file: a list of pods to start with")
    ap.add_argument("--bind", default="127.0.0.1", help="address (::1 for IPv6)")
    ap.add_argument("--slices-file", help="JSON file rewritten with the ResourceSlices")
    a = ap.parse_args()
    token = a.token
    slices_file = a.slices_file
    bulk_n = a.bulk
    bulk_blob = b"x" * max(0, a.bulk_bytes - 400)
    if a.pods:
        with open(a.pods) as f:
            for p in json.load(f):
                o = make_pod(p)
                if p.get("mirror"):
                    o["metadata"]["annotations"]["kubernetes.io/config.mirror"] = p["mirror"]
                pods[p["uid"]] = o
    cls = ThreadingHTTPServer
    if ":" in a.bind:
        cls = type("Server6", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
    srv = cls((a.bind, 0), Handler)
    srv.daemon_threads = True
    if not a.plain:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=control, args=(a.ctl,), daemon=True).start()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, a.port_file)
    log("LISTEN", srv.server_address[1])
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
