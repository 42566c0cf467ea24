"""The client of upload-rss.sh: writes a deterministic Markdown document of
MB megabytes (10**6 bytes each), uploads it in parts through the MCP
server's document_upload_* tools (stateless JSON-RPC over HTTP, as the
other scripts call it) and prints what each step took and the answer.

    python3 upload-rss.py URL TOKEN MB [PID]

With the server's PID it also prints the server's VmHWM after the appends.
With UPLOAD_WHOLE=n it instead stores n documents of MB megabytes, each in
one store_document call, with sections of about 3.5 KB (a handbook's:
about 300 to the MiB), and prints each call's time.
"""
import os
import json
import random
import sys
import time
import urllib.request


def document(size, per_section=(20, 40), seed=27):
    rng = random.Random(seed)
    words = ("queue worker restart backlog gauge replica postgres vacuum index "
             "latency budget tenant shard token audit expiry größe naïve").split()
    out, n, sec = [], 0, 0
    while n < size:
        sec += 1
        head = "%s Section %d: %s\n\n" % ("#" * (1 + sec % 3), sec, rng.choice(words))
        paras = []
        for _ in range(rng.randint(*per_section)):  # by default ~17 KB a section: ~600 at 10 MB, under MaxDocumentSections
            paras.append(" ".join(rng.choice(words) for _ in range(rng.randint(40, 120))) + ".\n\n")
        chunk = head + "".join(paras)
        out.append(chunk)
        n += len(chunk.encode())
    text = "".join(out).encode()[:size]
    while True:  # cut on a character boundary
        try:
            return text.decode()
        except UnicodeDecodeError:
            text = text[:-1]


def call(url, token, tool, args):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": args}}).encode()
    req = urllib.request.Request(url, data=body, headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})
    with urllib.request.urlopen(req, timeout=600) as r:
        raw = r.read().decode()
    if raw.startswith("event:") or raw.startswith("data:"):
        raw = "".join(l[5:] for l in raw.splitlines() if l.startswith("data:"))
    res = json.loads(raw)["result"]
    if res.get("isError"):
        raise SystemExit("%s: %s" % (tool, res["content"][0]["text"]))
    return res["structuredContent"]


def hwm(pid):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1])


def store_whole(url, token, mb, n):
    for seed in range(1, n + 1):
        text = document(int(mb * 10**6), per_section=(4, 8), seed=seed)
        t0 = time.time()
        doc = call(url, token, "store_document",
                   {"title": "Handbook %d" % seed, "content": text, "source": "handbook-%d" % seed})
        print("store_document: %d bytes, %d sections, answered in %.0f ms"
              % (len(text.encode()), len(doc["sections"]), (time.time() - t0) * 1000))


def main():
    url, token, mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
    pid = sys.argv[4] if len(sys.argv) > 4 else None
    if os.environ.get("UPLOAD_WHOLE"):
        store_whole(url, token, mb, int(os.environ["UPLOAD_WHOLE"]))
        return
    text = document(int(mb * 10**6))
    data = text.encode()
    t0 = time.time()
    st = call(url, token, "document_upload_start",
              {"title": "Handbook %.2f MB" % mb, "totalBytes": len(data), "tags": ["handbook"]})
    step = st["maxPartBytes"]
    i, off = 0, 0
    while off < len(data):
        end = min(off + step, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # a character boundary
            end -= 1
        call(url, token, "document_upload_append",
             {"uploadId": st["uploadId"], "index": i, "content": data[off:end].decode()})
        i, off = i + 1, end
    t1 = time.time()
    if pid:
        print("after the appends: VmHWM %d kB" % hwm(pid))
    doc = call(url, token, "document_upload_finish", {"uploadId": st["uploadId"]})
    t2 = time.time()
    print("document: %d bytes in %d parts of at most %d; appends %.1f s, finish %.1f s; %d sections, id %s"
          % (len(data), i, step, t1 - t0, t2 - t1, len(doc.get("sections", [])), doc.get("id")))


main()
