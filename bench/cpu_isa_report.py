#!/usr/bin/python3
"""The int8 matrix multiply on one forced ISA path, against the machine's limits for that path,
measured in the same run, and (optionally) against an older dmlserve_bench and oneDNN pinned to the
same ISA. Prints a markdown table. Not run by CI; see docs/benchmarks.md.

  /usr/bin/python3 bench/cpu_isa_report.py --isa=avx2 [--bench=build/bench/dmlserve_bench]
      [--baseline=OLD/dmlserve_bench] [--onednn=build/bench/dmlserve_onednn_bench]
      [--ort=bench/onnxruntime/ort_qgemm_bench.py] [--rounds=3] [--filter=REGEX] [--min_time=0.4]

--ort adds ONNX Runtime (its Python package, which must be importable by the python3 on PATH)
on the same cases, interleaved with the others in every round. ORT has no switch for its ISA: it
runs its best path for the machine, so its column means most with --isa at the machine's best.

This machine's readings drift (a probe once moved 2x within minutes), so the limits are measured
between the cases in every round, and each figure keeps its best reading of all rounds. Each case's
limit is the one that binds it: the ISA's multiply step (for a 7-bit-weight case the saturating
step, which its kernel uses) or, for few rows, reading B once (2 operations per byte of B per
row), from memory, or from the last-level cache for a registered B that fits it, or, for few
columns, reading A once (2 operations per byte of A per column), from the cache where it fits. A
one-row product on full-range weights at AVX2 must widen every byte of B it multiplies (no AVX2
instruction multiplies u8 by s8 into int32 without saturating), so its step is the widening one
(Avx2ExactWideningPeak: vpmovsxbw, vpmaddwd, vpaddd), when that is below the read.
"""

import argparse
import json
import os
import re
import subprocess
import sys

# The ISA's multiply-step probe (BM_CpuMachineLimit_*) and, for AVX2, the saturating one.
STEP = {
    'avx2': 'Avx2ExactPeak',
    'avxvnni': 'AvxVnniPeak',
    'avx512vnni': 'VpdpbusdPeak',
    'amx': 'TdpbusdPeak',
}
# oneDNN's name for the same ISA (ONEDNN_MAX_CPU_ISA).
ONEDNN_ISA = {'avx2': 'AVX2', 'avxvnni': 'AVX2_VNNI', 'avx512vnni': 'AVX512_CORE_VNNI',
              'amx': 'AVX512_CORE_AMX'}

DEFAULT_FILTER = ('u8s8_256x4096x4096_registered_b|u8s8_256x4096x4096/|'
                  'u8s8_b7_256x4096x4096_registered_b|u8s8_b7_256x4096x4096/|'
                  'u8s8_per_column_256x4096x4096_registered_b|u8u8_256x4096x4096_registered_b|'
                  's8s8_256x4096x4096_registered_b|u8s8_1024x1024x1024_registered_b|'
                  'u8s8_16x4096x4096_registered_b|u8s8_1x4096x4096_registered_b|u8s8_1x4096x4096/|'
                  'u8s8_b7_1x4096x4096_registered_b|'
                  'u8s8_odd_255x4001x4095_registered_b|u8s8_odd_4096x4093x15_registered_b|'
                  'u8s8_odd_7x4096x11008_registered_b|u8s8_odd_333x1000x777_registered_b|'
                  'u8s8_odd_61x2050x3001_registered_b|u8s8_odd_128x11008x4096_registered_b')


def run(binary, benchmark_filter, env, min_time):
  """Runs a Google Benchmark binary; returns {name: counters} of its non-skipped results."""
  out = subprocess.run(
      [binary, f'--benchmark_filter={benchmark_filter}', f'--benchmark_min_time={min_time}',
       '--benchmark_format=json'],
      env={**os.environ, **env}, capture_output=True, text=True, check=False)
  if out.returncode != 0:
    sys.exit(f'{binary} failed ({out.returncode}): {out.stderr[-2000:]}')
  results = {}
  if not out.stdout.strip():  # no case matched the filter (e.g. one oneDNN lacks)
    return results
  # Google Benchmark writes non-finite counters as bare NaN/inf, which JSON does not allow.
  report = json.loads(re.sub(r':\s*-?(nan|NaN|inf|Infinity)\b', ': null', out.stdout))
  for b in report['benchmarks']:
    if b.get('error_occurred'):
      continue
    parts = b['name'].split('/')
    results[(parts[0], parts[1] if len(parts) > 1 else '')] = b
  return results


def best(table, key, value):
  if value is not None and value > table.get(key, 0):
    table[key] = value


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--isa', required=True, choices=sorted(STEP))
  parser.add_argument('--bench', default='build/bench/dmlserve_bench')
  parser.add_argument('--baseline')
  parser.add_argument('--onednn')
  parser.add_argument('--ort')
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--filter', default=DEFAULT_FILTER)
  parser.add_argument('--min_time', default='0.4')
  args = parser.parse_args()
  env = {'DMLSERVE_CPU_ISA': args.isa}
  limits, ours, base, onednn, ort = {}, {}, {}, {}, {}
  wrong = set()  # cases oneDNN computed wrongly (timed anyway)
  avx2_steps = '|Avx2SaturatingPeak|Avx2ExactWideningPeak' if args.isa == 'avx2' else ''
  limit_filter = f'MachineLimit_({STEP[args.isa]}{avx2_steps}|ReadBandwidth)'
  case_filter = f'BM_CpuQGemm/({args.filter})'
  for _ in range(args.rounds):
    for (name, arg), b in run(args.bench, limit_filter, env, args.min_time).items():
      best(limits, name + ('/' + arg if arg.isdigit() else ''), b.get('GOP/s', b.get('GB/s')))
    for binary, table in ((args.bench, ours), (args.baseline, base)):
      if binary:
        for (_, name), b in run(binary, case_filter, env, args.min_time).items():
          best(table, name, b.get('GOP/s'))
    if args.onednn:
      for (_, name), b in run(args.onednn, f'BM_OneDnnQGemm/({args.filter})',
                              {'ONEDNN_MAX_CPU_ISA': ONEDNN_ISA[args.isa],
                               'DMLSERVE_ONEDNN_TIME_WRONG': '1'}, args.min_time).items():
        best(onednn, name, b.get('GOP/s'))
        if b.get('wrong_output'):
          wrong.add(name)
    if args.ort:
      for (_, name), b in run(args.ort, f'BM_OrtQGemm/({args.filter})', {}, args.min_time).items():
        best(ort, name, b.get('GOP/s'))
  step = limits.get(f'BM_CpuMachineLimit_{STEP[args.isa]}')
  saturating = limits.get('BM_CpuMachineLimit_Avx2SaturatingPeak')
  widening = limits.get('BM_CpuMachineLimit_Avx2ExactWideningPeak')
  memory = limits.get('BM_CpuMachineLimit_ReadBandwidth/256')
  cache = limits.get('BM_CpuMachineLimit_ReadBandwidth/16')
  print(f'ISA path: {args.isa} (DMLSERVE_CPU_ISA={args.isa}); best of {args.rounds} rounds\n')
  print(f'Limits: multiply step {STEP[args.isa]} {step or 0:.0f} GOP/s'
        + (f', saturating step {saturating:.0f} GOP/s' if saturating and args.isa == 'avx2' else '')
        + (f', widening step {widening:.0f} GOP/s' if widening and args.isa == 'avx2' else '')
        + (f', memory read {memory:.1f} GB/s' if memory else '')
        + (f', last-level cache read {cache:.1f} GB/s' if cache else '') + '\n')
  header = '| case | dmlserve GOP/s |'
  rule = '|---|---:|'
  if args.baseline:
    header += ' before GOP/s | after/before |'
    rule += '---:|---:|'
  if args.onednn:
    header += f' oneDNN ({ONEDNN_ISA[args.isa]}) GOP/s | dmlserve/oneDNN |'
    rule += '---:|---:|'
  if args.ort:
    header += ' ORT GOP/s | dmlserve/ORT |'
    rule += '---:|---:|'
  header += ' binding limit | of limit |'
  rule += '---|---:|'
  print(header)
  print(rule)
  for name in sorted(ours, key=lambda n: list(ours).index(n)):
    value = ours[name]
    row = f'| {name} | {value:.0f} |'
    if args.baseline:
      before = base.get(name)
      row += f' {before:.0f} | {value / before:.2f}x |' if before else ' - | - |'
    if args.onednn:
      other = onednn.get(name)
      mark = ' (wrong output)' if name in wrong else ''
      row += f' {other:.0f}{mark} | {value / other:.2f}x |' if other else ' - | - |'
    if args.ort:
      other = ort.get(name)
      row += f' {other:.0f} | {value / other:.2f}x |' if other else ' - | - |'
    m, k, n = map(int, re.search(r'_(\d+)x(\d+)x(\d+)', name).groups())
    seven_bit = '_b7_' in name and args.isa == 'avx2'
    compute = saturating if seven_bit else step
    label = 'saturating step' if seven_bit else 'multiply step'
    if args.isa == 'avx2' and not seven_bit and m == 1 and widening:
      compute, label = widening, 'widening step'
    limit = compute
    # A registered B that fits the 16 MiB probe's footprint stays in the
    # last-level cache between calls; any other B comes from memory.
    in_cache = 'registered' in name and k * n <= (16 << 20) and cache
    read, where = (cache, 'cache') if in_cache else (memory, 'memory')
    if read and compute and 2 * m * read < compute:
      limit, label = 2 * m * read, f'{where} (B once)'
    # Few columns: reading A once binds instead (2 operations per byte of A per
    # column). The bench multiplies the same A each call: one that fits the
    # probe's footprint comes from the last-level cache.
    a_read, a_where = (cache, 'cache') if m * k <= (16 << 20) and cache else (memory, 'memory')
    if a_read and limit and 2 * n * a_read < limit:
      limit, label = 2 * n * a_read, f'{a_where} (A once)'
    row += f' {label} | {value / limit:.0%} |' if limit else ' - | - |'
    print(row)


if __name__ == '__main__':
  main()
