#!/usr/bin/env python3
"""The two one-layer images of bench/run.sh (issue #20), written as OCI layouts.

  images.py one-layer SRC_OCI OUT_OCI
      every layer of SRC_OCI (gzip) copied, in order, into a single gzip layer: the same files
      as the 1.6 GB benchmark image, the shape of a squashed build or an ML/CUDA image.
  images.py many-paths NODE_MODULES OUT_OCI PATHS
      copies of a real node_modules tree (from `npm install`) under
      /srv/monorepo/packages/pkg-NNN/ until the layer holds at least PATHS paths, the shape of
      a monorepo image. package.json files are kept whole (facts read them); other files keep
      their first 512 bytes, so that the image measures paths rather than bytes.
"""
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile


class Hashing(io.RawIOBase):
    """A write-only file that hashes and counts what passes through to `out`."""

    def __init__(self, out):
        self.out, self.h, self.n = out, hashlib.sha256(), 0

    def writable(self):
        return True

    def write(self, b):
        self.h.update(b)
        self.n += len(b)
        self.out.write(b)
        return len(b)


def write_layout(out_dir, write_tar):
    """Writes one gzip layer (tar written by `write_tar(fileobj)`), its config and manifest."""
    blobs = os.path.join(out_dir, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)
    tmp = os.path.join(blobs, "layer.tmp")
    with open(tmp, "wb") as raw:
        gz = subprocess.Popen(["gzip", "-6", "-n", "-c"], stdin=subprocess.PIPE, stdout=raw)
        tar_side = Hashing(gz.stdin)
        write_tar(tar_side)
        gz.stdin.close()
        if gz.wait() != 0:
            sys.exit("gzip failed")
    h = hashlib.sha256()
    with open(tmp, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    layer_digest, layer_size = h.hexdigest(), os.path.getsize(tmp)
    os.replace(tmp, os.path.join(blobs, layer_digest))

    def blob(obj):
        data = json.dumps(obj, sort_keys=True).encode()
        d = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, d), "wb") as f:
            f.write(data)
        return d, len(data)

    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + tar_side.h.hexdigest()]},
    }
    cd, cs = blob(config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + cd, "size": cs},
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": "sha256:" + layer_digest,
                "size": layer_size,
            }
        ],
    }
    md, ms = blob(manifest)
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + md,
                "size": ms,
                "annotations": {"org.opencontainers.image.ref.name": "latest"},
            }
        ],
    }
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(out_dir, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


def layers_of(oci):
    idx = json.load(open(os.path.join(oci, "index.json")))
    digest = idx["manifests"][0]["digest"].split(":")[1]
    m = json.load(open(os.path.join(oci, "blobs", "sha256", digest)))
    return [os.path.join(oci, "blobs", "sha256", l["digest"].split(":")[1]) for l in m["layers"]]


def one_layer(src, out):
    def write(f):
        with tarfile.open(fileobj=f, mode="w|", format=tarfile.PAX_FORMAT) as t:
            for path in layers_of(src):
                with tarfile.open(path, mode="r|gz") as layer:
                    try:
                        for m in layer:
                            t.addfile(m, layer.extractfile(m) if m.isreg() else None)
                    except tarfile.ReadError:
                        # umoci ends a layer right after its last file's data, without the
                        # padding and zero blocks; every member was read by then.
                        pass

    write_layout(out, write)


def many_paths(tree, out, want):
    entries = []  # (relative path, kind, data or link target, mode)
    base = os.path.dirname(os.path.abspath(tree))
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        rel = os.path.relpath(dirpath, base)
        entries.append((rel, "dir", None, 0o755))
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, name)
            r = os.path.join(rel, name)
            if os.path.islink(p):
                entries.append((r, "link", os.readlink(p), 0o777))
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    data = f.read() if name == "package.json" else f.read(512)
                entries.append((r, "file", data, os.stat(p).st_mode & 0o777))

    def write(f):
        with tarfile.open(fileobj=f, mode="w|", format=tarfile.PAX_FORMAT) as t:
            written = 0
            for d in ("srv", "srv/monorepo", "srv/monorepo/packages"):
                t.addfile(dir_info(d))
                written += 1
            copy = 0
            while written < want:
                prefix = f"srv/monorepo/packages/pkg-{copy:03d}"
                t.addfile(dir_info(prefix))
                written += 1
                for rel, kind, data, mode in entries:
                    info = tarfile.TarInfo(f"{prefix}/{rel}")
                    info.mode, info.mtime = mode, 1700000000
                    if kind == "dir":
                        info.type = tarfile.DIRTYPE
                        t.addfile(info)
                    elif kind == "link":
                        info.type, info.linkname = tarfile.SYMTYPE, data
                        t.addfile(info)
                    else:
                        info.size = len(data)
                        t.addfile(info, io.BytesIO(data))
                    written += 1
                copy += 1
            print(f"{written} paths in {copy} copies", file=sys.stderr)

    write_layout(out, write)


def dir_info(name):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1700000000
    return info


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "one-layer":
        one_layer(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "many-paths":
        many_paths(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)
