#!/bin/sh
# Dumps every kernel variant the planners can produce (dmlserve-dxbc --all)
# and runs vkd3d 1.2's compiler on each: it must convert to SPIR-V without a
# single diagnostic (vkd3d prints "fixme:" for what it does not understand),
# except one: vkd3d 1.2 names no case for a device-wide UAV fence (sync flag
# 0x8, the scan look-back's) yet compiles it to a barrier with device memory
# scope over every storage class, which KernelKeyTest.
# LookbackFencesAreDeviceScopeInSpirv checks in the SPIR-V itself.
# usage: check_all_kernels.sh DMLSERVE_DXBC VKD3D_COMPILER WORK_DIR
set -u
tool="$1"; compiler="$2"; dir="$3"
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$tool" --all "$dir" || { echo "dmlserve-dxbc --all failed"; exit 1; }
count=0; failures=0
while read -r n key; do
  count=$((count + 1))
  "$compiler" -x dxbc-tpf -b spirv-binary -o "$dir/$n.spv" "$dir/$n.dxbc" >"$dir/$n.log" 2>&1
  rc=$?
  out=$(grep -v '^fixme:vkd3d_dxbc_compiler_emit_sync: Unhandled sync flags 0x8\.$' "$dir/$n.log")
  if [ $rc -ne 0 ] || [ -n "$out" ] || [ ! -s "$dir/$n.spv" ]; then
    echo "FAIL $key (rc=$rc): $out"
    failures=$((failures + 1))
  fi
done < "$dir/index.txt"
echo "$count kernels, $failures failed"
[ "$count" -gt 0 ] && [ "$failures" -eq 0 ]
