"""A Prometheus client's view of tierfs' metrics, for t_metrics.sh.

  metrics_client.py parse SOURCE           check the exposition, print a summary
  metrics_client.py value SOURCE NAME [LABEL=VALUE...]   print one sample's value
  metrics_client.py status PORT REQUEST    send raw bytes, print the HTTP status
                                           (\r\n escapes; {big}: 64 KiB of 'a')

SOURCE is http://... or a file. The parse is prometheus_client's own
(text_string_to_metric_families), the parser Prometheus' Python tools use:
every sample line must come out of it as a sample, every family must carry
HELP and TYPE, and each histogram must be cumulative with its _count equal
to its +Inf bucket. Exit status 1 with the reason on stderr when not.
"""
import socket
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def fetch(src):
    if src.startswith("http://"):
        with urllib.request.urlopen(src, timeout=10) as r:
            ctype = r.headers.get("Content-Type", "")
            if not ctype.startswith("text/plain; version=0.0.4"):
                sys.exit(f"{src}: Content-Type {ctype!r}, want text/plain; version=0.0.4")
            return r.read().decode("utf-8")
    with open(src, encoding="utf-8") as f:
        return f.read()


def parse(src):
    text = fetch(src)
    lines = [l for l in text.split("\n") if l and not l.startswith("#")]
    helps = {l.split()[2] for l in text.split("\n") if l.startswith("# HELP ")}
    types = {l.split()[2]: l.split()[3] for l in text.split("\n") if l.startswith("# TYPE ")}
    fams = list(text_string_to_metric_families(text))
    nsamples = sum(len(f.samples) for f in fams)
    if nsamples != len(lines):
        sys.exit(f"{src}: {len(lines)} sample lines, the parser read {nsamples}")
    for f in fams:
        # The parser names a counter's family without _total.
        name = f.name + "_total" if f.type == "counter" and f.name + "_total" in types else f.name
        if name not in helps or types.get(name) != f.type or not f.documentation:
            sys.exit(f"{src}: family {name}: HELP or TYPE missing or wrong ({types.get(name)})")
        if f.type == "histogram":
            series = {}
            for s in f.samples:
                key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                series.setdefault(key, {"b": [], "count": None})
                if s.name.endswith("_bucket"):
                    series[key]["b"].append((float(s.labels["le"]), s.value))
                elif s.name.endswith("_count"):
                    series[key]["count"] = s.value
            for key, v in series.items():
                b = sorted(v["b"])
                if not b or b[-1][0] != float("inf"):
                    sys.exit(f"{src}: {f.name}{key}: no +Inf bucket")
                if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
                    sys.exit(f"{src}: {f.name}{key}: buckets not cumulative")
                if v["count"] != b[-1][1]:
                    sys.exit(f"{src}: {f.name}{key}: _count {v['count']} != +Inf {b[-1][1]}")
    for f in sorted(fams, key=lambda f: f.name):
        print(f"{f.name} {f.type}")


def value(src, name, labels):
    want = dict(l.split("=", 1) for l in labels)
    for f in text_string_to_metric_families(fetch(src)):
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in want.items()):
                print(int(s.value) if s.value == int(s.value) else s.value)
                return
    sys.exit(f"{src}: no sample {name}{want}")


def status(port, request):
    with socket.create_connection(("127.0.0.1", int(port)), timeout=15) as c:
        try:
            raw = request.encode("latin-1").decode("unicode_escape")
            c.sendall(raw.replace("{big}", "a" * (64 << 10)).encode("latin-1"))
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before it read everything: the reply may be there
        data = b""
        try:
            while b"\r\n" not in data:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
        except ConnectionResetError:
            pass
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    print(line.split()[1] if line.startswith("HTTP/1.") and len(line.split()) > 1 else "closed")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "parse":
        parse(args[0])
    elif cmd == "value":
        value(args[0], args[1], args[2:])
    elif cmd == "status":
        status(args[0], args[1])
    else:
        sys.exit(f"unknown command {cmd}")
