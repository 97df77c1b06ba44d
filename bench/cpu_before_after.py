#!/usr/bin/python3
"""Two builds of dmlserve_bench on the same cases and forced ISA levels, alternating, in one run:
the best and the median real time of each (in its benchmark's unit) over the rounds, and after/before of both. Prints a
markdown table. On a machine whose speed swings between rounds the medians are the steadier
figure. Not run by CI; see docs/benchmarks.md.

  /usr/bin/python3 bench/cpu_before_after.py --before=OLD/build/bench/dmlserve_bench \\
      [--after=build/bench/dmlserve_bench] [--isas=avx512vnni,avxvnni,avx2] [--rounds=3] \\
      [--filter=REGEX] [--min_time=0.3]

The order of the two binaries flips every round, so neither always runs on a cooler machine. A
level the CPU lacks falls back to the best it has (DMLSERVE_CPU_ISA caps the level).
"""

import argparse
import json
import os
import statistics
import subprocess

DEFAULT_FILTER = ('BM_CpuQGemm/(u8s8_256x4096x4096_registered_b|u8s8_256x4096x4096|'
                  's8s8_256x4096x4096_registered_b|u8s8_16x4096x4096_registered_b|'
                  'u8s8_1x4096x4096_registered_b|u8s8_odd_255x4001x4095_registered_b)/')


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--before', required=True)
  parser.add_argument('--after', default='build/bench/dmlserve_bench')
  parser.add_argument('--isas', default='avx512vnni,avxvnni,avx2')
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--filter', default=DEFAULT_FILTER)
  parser.add_argument('--min_time', default='0.3')
  args = parser.parse_args()
  isas = args.isas.split(',')
  times = {}
  for r in range(args.rounds):
    for isa in isas:
      pair = [('before', args.before), ('after', args.after)]
      for side, binary in pair if r % 2 == 0 else reversed(pair):
        out = subprocess.run(
            [binary, f'--benchmark_filter={args.filter}', f'--benchmark_min_time={args.min_time}',
             '--benchmark_format=json'],
            env={**os.environ, 'DMLSERVE_CPU_ISA': isa}, capture_output=True, text=True,
            check=True)
        for b in json.loads(out.stdout)['benchmarks']:
          if b.get('error_occurred'):
            continue
          key = (isa, b['name'].split('/')[1], side)
          times.setdefault(key, []).append(b['real_time'])
  print('| ISA | case | before best | after best | after/before | before median | after median '
        '| after/before |')
  print('|---|---|---:|---:|---:|---:|---:|---:|')
  for isa in isas:
    for case in sorted({k[1] for k in times if k[0] == isa}):
      before, after = times.get((isa, case, 'before')), times.get((isa, case, 'after'))
      if before and after:
        b_best, a_best = min(before), min(after)
        b_med, a_med = statistics.median(before), statistics.median(after)
        print(f'| {isa} | {case} | {b_best:.3f} | {a_best:.3f} | {a_best / b_best:.2f} '
              f'| {b_med:.3f} | {a_med:.3f} | {a_med / b_med:.2f} |')


if __name__ == '__main__':
  main()
