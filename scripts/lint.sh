#!/usr/bin/env bash
# dlock's lint step (run by scripts/test.sh before the build): the shape rules
# of docs/design.md, "Code layout", checked on the sources as they are.
#
#   scripts/lint.sh
#
# - no function in src/ or include/ longer than 80 lines (universal-ctags
#   finds each function's first and last line; it parses C++20, where
#   pmccabe loses its place at digit separators and lambdas);
# - no file in src/ longer than 600 lines;
# - each folder of src/ includes only itself and the folders below it;
# - src/engine/ names no kind (Kind::k...: the engine knows kinds by their
#   traits) and has no file of a primitive; engine.hpp is at most 250 lines;
# - a kind's file (one that derives a kind or includes kind_context.hpp)
#   includes neither engine/engine.hpp nor a header that does: a kind sees
#   the engine only through KindContext;
# - cli/ and bench/ include no header of src/ but api/tools.hpp.
# Prints every breach and exits 1 if there is one.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

max_function_lines=80
max_file_lines=600
failed=0
breach() {
  echo "lint: $*" >&2
  failed=1
}

command -v ctags >/dev/null && ctags --version 2>/dev/null | grep -q "Universal Ctags" ||
  { echo "lint: universal-ctags is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }

# Functions: "<first line> <last line> <file> <name>", one per line.
while IFS=$'\t' read -r first last file name; do
  [ -n "$last" ] || continue
  lines=$((last - first + 1))
  [ "$lines" -le "$max_function_lines" ] ||
    breach "$file:$first: $name is $lines lines (at most $max_function_lines)"
done < <(ctags -x --languages=C++ --map-C++=+.hpp --kinds-C++=f --fields=+ne \
  --_xformat='%n	%e	%F	%N' -R src include)

while read -r lines file; do
  [ "$file" = total ] && continue
  [ "$lines" -le "$max_file_lines" ] || breach "$file is $lines lines (at most $max_file_lines)"
done < <(find src -name '*.cpp' -o -name '*.hpp' | sort | xargs wc -l)

# The layers, lowest first: a folder may include its own headers and those
# of the folders listed before it (metrics is a leaf the sql layer counts
# statements with; prometheus sees the public headers only).
declare -A allowed=(
  [base]="base"
  [metrics]="metrics"
  [sql]="base metrics sql"
  [wakeup]="base metrics sql wakeup"
  [runtime]="base metrics sql runtime"
  [engine]="base metrics sql wakeup runtime engine"
  [primitives]="base metrics sql wakeup runtime engine primitives"
  [api]="base metrics sql wakeup runtime engine primitives api"
  [prometheus]=""
)
for folder in src/*/; do
  folder="$(basename "$folder")"
  if [ -z "${allowed[$folder]+set}" ]; then
    breach "src/$folder is not in the layer table of scripts/lint.sh"
    continue
  fi
  while IFS=: read -r file line include; do
    target="$(sed -E 's/^#include "([a-z_]+)\/.*/\1/' <<<"$include")"
    [ "$target" = dlock ] && continue
    [[ " ${allowed[$folder]} " == *" $target "* ]] ||
      breach "$file:$line: src/$folder includes $target/ (a higher layer or a sibling)"
  done < <(grep -rnoE '^#include "[a-z_]+/' "src/$folder" || true)
done

# The engine knows no primitive (docs/design.md, "Map").
while IFS=: read -r file line _; do
  breach "$file:$line: src/engine/ names a kind (give the kind a trait instead)"
done < <(grep -rnE 'Kind::k[A-Z]' src/engine || true)
for file in src/engine/*; do
  case "$(basename "$file")" in
    *election* | *multi* | *lock_set* | *fair* | *semaphore* | *read_write*) breach "$file: a primitive's file in src/engine/" ;;
  esac
done
# A kind sees the engine through KindContext only (docs/design.md, "Map").
engine_headers="engine/engine.hpp $(grep -rlE '^#include "engine/engine\.hpp"' src --include='*.hpp' | sed 's|^src/||' | tr '\n' ' ')"
while read -r file; do
  for header in $engine_headers; do
    grep -qE "^#include \"${header//./\\.}\"" "$file" &&
      breach "$file: a kind includes $header (it sees the engine through engine/kind_context.hpp only)"
  done
done < <(grep -rlE 'public (HoldKind|LockKind)\b|^#include "engine/kind_context\.hpp"' src/primitives || true)
engine_header_lines=$(wc -l <src/engine/engine.hpp)
[ "$engine_header_lines" -le 250 ] || breach "src/engine/engine.hpp is $engine_header_lines lines (at most 250)"

# The dlock command and the benchmarks use the public API and one internal
# header, api/tools.hpp (docs/design.md, "Source layout").
while IFS=: read -r file line include; do
  [[ "$include" == *'"api/tools.hpp"'* ]] ||
    breach "$file:$line: $include (cli/ and bench/ include only api/tools.hpp of src/)"
done < <(grep -rnE '^#include "(base|metrics|sql|wakeup|runtime|engine|primitives|api|prometheus)/' cli bench || true)

[ "$failed" = 0 ] && echo "lint: ok"
exit "$failed"
