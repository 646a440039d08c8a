#!/usr/bin/python3
"""The baseline of BenchmarkMeasurementUID: OONI's way of computing the
legacy measurement_uid of the measurements of a folder of raw reports, one
process.

JSON reports: every line, as OONI's fastpath does it (ujson loads the
line; SHAKE128 of the line with its newline, 15 bytes; the date of
measurement_start_time read with datetime.strptime).

YAML reports (with --yaml-bytes N): OONI's fastpath loads each document
after the header with PyYAML's yaml.safe_load and hashes it with SHAKE128;
its normalisation of the entry, which comes on top, is left out, so this
is less than OONI's cost. It is slow (under 1 MB/s), so only the
documents of the first reports, in name order, up to N bytes, are read.

Prints one line: JSON lines, JSON seconds, YAML documents, YAML bytes read,
YAML seconds, YAML document bytes in all."""
import hashlib
import os
import sys
import time
from datetime import datetime

import ujson
import yaml


def json_uid(line):
    msm = ujson.loads(line)
    h = hashlib.shake_128(line).hexdigest(15)
    try:
        t = datetime.strptime(msm.get("measurement_start_time") or "", "%Y-%m-%d %H:%M:%S")
        day = t.strftime("%Y%m%d")
    except Exception:
        day = "00000000"
    return "01" + day + h


def yaml_docs(data):
    """The documents after the header: from a '---' line to a '...' line."""
    docs, cur = [], None
    for line in data.splitlines(keepends=True):
        if line.startswith(b"---"):
            cur = [line]
        elif cur is not None:
            cur.append(line)
            if line.startswith(b"..."):
                docs.append(b"".join(cur))
                cur = None
    return docs[1:]


def files(root, ext):
    for d, _, names in sorted(os.walk(root)):
        for name in sorted(names):
            if name.endswith(ext):
                yield os.path.join(d, name)


args = sys.argv[1:]
yaml_budget = 0
if args[0] == "--yaml-bytes":
    yaml_budget = int(args[1])
    args = args[2:]
root = args[0]

n, start = 0, time.perf_counter()
for path in files(root, ".json"):
    with open(path, "rb") as f:
        for line in f:
            try:
                json_uid(line)
            except ValueError:
                pass
            n += 1
json_s = time.perf_counter() - start

docs, read, total, yaml_s = 0, 0, 0, 0.0
for path in files(root, ".yaml"):
    with open(path, "rb") as f:
        these = yaml_docs(f.read())
    total += sum(len(d) for d in these)
    if read >= yaml_budget:
        continue
    start = time.perf_counter()
    for doc in these:
        try:
            yaml.safe_load(doc)
        except yaml.YAMLError:
            pass
        hashlib.shake_128(doc).hexdigest(15)
        docs += 1
        read += len(doc)
    yaml_s += time.perf_counter() - start
print(n, json_s, docs, read, yaml_s, total)
