"""Reference: Cumulus v21 generateUniqueGranuleId (deterministic form) in
Python 3. Reads "hex(id)\thex(collectionId)\thashLength" lines, writes
hex(UTF-8 of the unique ID) lines."""
import base64
import hashlib
import sys


def unique_id(granule_id, collection_id, hash_length):
    digest = hashlib.md5(collection_id.encode("utf-8")).digest()
    text = base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")
    return "%s_%s" % (granule_id, text.replace("_", "")[:hash_length])


for line in sys.stdin:
    gid, coll, n = line.rstrip("\n").split("\t")
    s = unique_id(bytes.fromhex(gid).decode("utf-8"), bytes.fromhex(coll).decode("utf-8"), int(n))
    sys.stdout.write(s.encode("utf-8").hex() + "\n")
