#!/usr/bin/env bash
# Usage: ./trial.sh [patch.diff]
# 1. refuse the diff if any path in it is not on allowlist.txt (rejected, never trimmed);
# 2. git-apply it in a throwaway copy and run the red node there;
# 3. confirm the working tree itself is still red.
set -u
patch=$(realpath -- "${1:-patch.diff}")
cd "$(dirname "$0")"
node="tests/test_compute.py::test_add_tax_rounds_half_up"

grep -q '^@@ ' "$patch" || { echo "REJECT: $patch has no hunks, it is not a diff"; exit 1; }
paths=$( { sed -n 's/^diff --git a\/\([^ ]*\) b\/\(.*\)$/\1\n\2/p' "$patch"
           sed -n -E 's/^(---|\+\+\+|rename from|rename to|copy from|copy to) //p' "$patch" \
             | cut -f1 | sed -E 's#^[ab]/##'; } | sort -u)
[ -n "$paths" ] || { echo "REJECT: no file headers in $patch"; exit 1; }
while read -r p; do
    grep -qxF -- "$p" allowlist.txt || { echo "REJECT: $p is not on the allowlist"; exit 1; }
done <<< "$paths"
echo "allowlist ok: $(echo $paths)"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tar --exclude=__pycache__ --exclude=.pytest_cache -cf - . | tar -xf - -C "$scratch"
( cd "$scratch" && git apply --check "$patch" && git apply "$patch" ) || { echo "git apply failed"; exit 1; }
( cd "$scratch" && python3 -B -m pytest -q -p no:cacheprovider "$node" | tail -1 )
copy_rc=${PIPESTATUS[0]}
( cd "$scratch" && python3 -B -c '
from taxlib import add_tax
for cents, bps, want in [(199, 725, 213), (200, 25, 201), (199, 25, 199), (3, 5000, 5),
                         (1, 1, 1), (0, 9999, 0), (5, 0, 5), (12345678901234567, 725, 13240740621574073)]:
    got = add_tax(cents, bps)
    print("ok  " if got == want else "BAD ", cents, bps, got, want)
' )
python3 -B -m pytest -q -p no:cacheprovider "$node" >/dev/null
own_rc=$?
echo "copy exit $copy_rc (want 0); own tree exit $own_rc (want 1)"
[ "$copy_rc" -eq 0 ] && [ "$own_rc" -ne 0 ]
