#!/usr/bin/env bash
# Regenerates the op table in docs/ops.md from `kiln ops` (run after changing ir/ops.def).
set -euo pipefail
cd "$(dirname "$0")/.."
kiln="${1:-./build/tools/kiln}"
table=$("$kiln" ops)
python3 - "$table" <<'PY'
import sys, re
table = sys.argv[1]
path = "docs/ops.md"
doc = open(path).read()
begin, end = "<!-- op-table:begin -->", "<!-- op-table:end -->"
i, j = doc.index(begin) + len(begin), doc.index(end)
open(path + ".tmp", "w").write(doc[:i] + "\n" + table + "\n" + doc[j:])
import os; os.replace(path + ".tmp", path)
PY
echo "docs/ops.md updated"
