#!/bin/sh
# Check patch.diff stays on the allowlist, apply it in a throwaway copy, run the node there,
# and confirm the working tree itself is still red. Usage: sh tools/try_patch.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
node="tests/test_compute.py::test_add_tax_rounds_half_up"

# 1. every path the diff names must be on the allowlist (a/ and b/ prefixes stripped)
paths=$(sed -n -e 's#^--- a/##p' -e 's#^+++ b/##p' "$root/patch.diff" | sort -u)
[ -n "$paths" ] || { echo "reject: patch.diff names no path"; exit 1; }
for p in $paths; do
  grep -qxF "$p" "$root/allowlist.txt" || { echo "reject: $p is not on the allowlist"; exit 1; }
done

# 2. apply in a copy and run the node there
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -R "$root/taxlib" "$root/tests" "$root/allowlist.txt" "$root/patch.diff" "$copy/"
(cd "$copy" && git apply --check patch.diff && git apply patch.diff \
  && python3 -m pytest -q -p no:cacheprovider "$node")

# 3. the working tree must still be red
if (cd "$root" && python3 -m pytest -q -p no:cacheprovider "$node" >/dev/null 2>&1); then
  echo "unexpected: the working tree is green before promotion"; exit 1
fi
echo "ok: green in the copy, still red in the tree"
