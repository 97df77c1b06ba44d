#!/bin/sh
# Dumps every kernel variant the planners can produce (dmlserve-dxbc --all)
# and runs vkd3d 1.2's compiler on each: it must convert to SPIR-V without a
# single diagnostic (vkd3d prints "fixme:" for what it does not understand).
# usage: check_all_kernels.sh DMLSERVE_DXBC VKD3D_COMPILER WORK_DIR
set -u
tool="$1"; compiler="$2"; dir="$3"
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$tool" --all "$dir" || { echo "dmlserve-dxbc --all failed"; exit 1; }
count=0; failures=0
while read -r n key; do
  count=$((count + 1))
  out=$("$compiler" -x dxbc-tpf -b spirv-binary -o "$dir/$n.spv" "$dir/$n.dxbc" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || [ -n "$out" ] || [ ! -s "$dir/$n.spv" ]; then
    echo "FAIL $key (rc=$rc): $out"
    failures=$((failures + 1))
  fi
done < "$dir/index.txt"
echo "$count kernels, $failures failed"
[ "$count" -gt 0 ] && [ "$failures" -eq 0 ]
