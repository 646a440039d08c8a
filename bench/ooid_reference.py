#!/usr/bin/env python3
"""Baseline for the OOID benchmarks: the ooni-uuid definition of an
OOID in plain Python (regex with a backreference, calendar.timegm, hashlib),
reading "TEXTNAME<TAB>NDX" lines and writing "OOID<TAB>TEXTNAME<TAB>NDX".
It does per measurement what the definition says, with no caching."""
import calendar
import hashlib
import re
import sys

TEXTNAME = re.compile(
    r"^(?P<bktyear>20[0-9]{2})-(?P<bktmon>[01][0-9])-(?P<bktday>[0123][0-9])/"
    r"(?P<year>20[0-9]{2})(?P<mon>[01][0-9])(?P<day>[0123][0-9])"
    r"T(?P<hr>[012][0-9])(?P<min>[0-5][0-9])(?P<sec>[0-5][0-9])Z-"
    r"[A-Z][A-Z]-AS(?P<asn>[0-9]{1,10})-[^-]+-"
    r"(?P<report_id>no_report_id|"
    r"(?P<ridyear>20[0-9]{2})(?P<ridmon>[01][0-9])(?P<ridday>[0123][0-9])"
    r"T(?P<ridhr>[012][0-9])(?P<ridmin>[0-5][0-9])(?P<ridsec>[0-5][0-9])Z_AS(?P=asn)_[0-9A-Za-z]{50}"
    r"|[A-Za-z0-9]{64})-0\.[12]\.0-probe\.(?:yaml|json)$"
)


def ts(textname):
    m = TEXTNAME.match(textname)
    p = "rid" if m.group("ridyear") else ""
    parts = [int(m.group(p + k)) for k in ("year", "mon", "day", "hr", "min", "sec")]
    return calendar.timegm(parts)


def ooid(textname, ndx):
    cnt = (int(hashlib.sha1(textname.encode()).hexdigest()[-7:], 16) + ndx) & 0x0FFFFFFF
    return "%016x" % (ts(textname) << 32 | 0xF << 28 | cnt)


def main():
    out = sys.stdout
    for line in sys.stdin:
        name, _, ndx = line.rstrip("\n").partition("\t")
        n = int(ndx) if ndx else 0
        out.write("%s\t%s\t%d\n" % (ooid(name, n), name, n))


if __name__ == "__main__":
    main()
