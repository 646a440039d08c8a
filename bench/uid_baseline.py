#!/usr/bin/python3
"""The baseline of BenchmarkMeasurementUID: the legacy measurement_uid of
every line of the JSON reports under a folder, computed the way OONI's
fastpath does it (ujson loads the line; SHAKE128 of the line with its
newline, 15 bytes; the date of measurement_start_time read with
datetime.strptime), one process. Prints the number of uids."""
import hashlib
import os
import sys
from datetime import datetime

import ujson


def uid(line):
    msm = ujson.loads(line)
    h = hashlib.shake_128(line).hexdigest(15)
    try:
        t = datetime.strptime(msm.get("measurement_start_time") or "", "%Y-%m-%d %H:%M:%S")
        day = t.strftime("%Y%m%d")
    except Exception:
        day = "00000000"
    return "01" + day + h


n = 0
for root, _, files in os.walk(sys.argv[1]):
    for name in sorted(files):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(root, name), "rb") as f:
            for line in f:
                try:
                    uid(line)
                except ValueError:
                    pass
                n += 1
print(n)
