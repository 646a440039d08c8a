#!/usr/bin/env python3
"""Write BUCKET/index.json.gz for the .lz4 files of a canned bucket folder,
in the format of the OONI canning step (af/shovel/canning.py): one JSON
object per container, json.dump(sort_keys=True), tar rows first, base64
SHA-1, signed CRC-32 (Python 2 zlib.crc32). A test oracle, independent of
the Go code; it needs the lz4 CLI."""
import base64, gzip, hashlib, io, json, os, subprocess, sys, tarfile, zlib


def signed(crc):
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def sums(data):
    return signed(zlib.crc32(data)), base64.b64encode(hashlib.sha1(data).digest()).decode(), len(data)


def main(bucket_dir):
    bucket = os.path.basename(os.path.normpath(bucket_dir))
    tars, asis = [], []
    for name in sorted(os.listdir(bucket_dir)):
        if not name.endswith(".lz4"):
            continue
        raw = open(os.path.join(bucket_dir, name), "rb").read()
        text = subprocess.run(["lz4", "-dc"], input=raw, stdout=subprocess.PIPE, check=True).stdout
        fcrc, fsha, fsize = sums(raw)
        row = {"file_crc32": fcrc, "file_sha1": fsha, "file_size": fsize, "filename": bucket + "/" + name}
        if name.endswith(".tar.lz4"):
            canned = []
            with tarfile.open(fileobj=io.BytesIO(text)) as tf:
                for m in tf:
                    data = tf.extractfile(m).read()
                    crc, sha, size = sums(data)
                    canned.append({"text_crc32": crc, "text_sha1": sha, "text_size": size, "textname": m.name})
            row.update({"canned": canned, "text_size": len(text)})
            tars.append(row)
        else:
            crc, sha, size = sums(text)
            row.update({"text_crc32": crc, "text_sha1": sha, "text_size": size, "textname": bucket + "/" + name[:-len(".lz4")]})
            asis.append(row)
    with gzip.open(os.path.join(bucket_dir, "index.json.gz"), "wt") as fd:
        for row in tars + asis:
            json.dump(row, fd, sort_keys=True)
            fd.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
