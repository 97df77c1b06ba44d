#!/usr/bin/env python3
"""ONNX Runtime's QLinearMatMul on dmlserve_bench's BM_CpuQGemm cases, through ORT's Python
package, printed as Google Benchmark JSON (BM_OrtQGemm/<case>/real_time, counter GOP/s), so that
bench/cpu_isa_report.py can put it beside dmlserve and oneDNN in one run. Not run by CI.

compare.mjs does the same through onnxruntime-node from npm; this one serves where npm is out of
reach but a Python with onnxruntime, onnx and numpy is there (the lent device machine's image).

  python3 bench/onnxruntime/ort_qgemm_bench.py --benchmark_filter=REGEX \
      [--benchmark_min_time=0.3] [--benchmark_format=json] [--threads=2]

The rate is the operator's: ORT's profiler times each QLinearMatMul kernel, and the median over
the timed calls is reported (session.run's own overhead left out, as compare.mjs does). The model
is compare.mjs's: the same quantization parameters, B an initializer for a registered B (ORT packs
it once at session creation) or an input for B per request. ORT has QLinearMatMul kernels for
(A, B, Y) = (u8, u8, u8), (u8, s8, u8) and (s8, s8, s8) only, so a uint8 A gives a uint8 output
(the same integer product, another final clamp) and A int8 with B uint8 is left out.
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

A_SCALE, B_SCALE = 0.02, 0.01
A_ZERO_POINT = {'u8': 128, 's8': 3}
B_ZERO_POINT = 1
NUMPY = {'u8': np.uint8, 's8': np.int8}
ONNX = {'u8': TensorProto.UINT8, 's8': TensorProto.INT8}


def cases():
  """The BM_CpuQGemm names this bench can run: {name: (a, b, m, k, n, registered, b7, per_col)}."""
  out = {}
  for a, b in (('u8', 's8'), ('u8', 'u8'), ('s8', 's8')):
    for m, k, n in ((256, 4096, 4096), (1024, 1024, 1024), (16, 4096, 4096), (1, 4096, 4096)):
      for registered in (True, False):
        name = f'{a}{b}_{m}x{k}x{n}' + ('_registered_b' if registered else '')
        out[name] = (a, b, m, k, n, registered, False, False)
  for m, k, n in ((256, 4096, 4096), (1, 4096, 4096)):
    for registered in (True, False):
      out[f'u8s8_b7_{m}x{k}x{n}' + ('_registered_b' if registered else '')] = (
          'u8', 's8', m, k, n, registered, True, False)
  out['u8s8_per_column_256x4096x4096_registered_b'] = ('u8', 's8', 256, 4096, 4096, True, False, True)
  for m, k, n in ((255, 4001, 4095), (4096, 4093, 15), (7, 4096, 11008), (333, 1000, 777),
                  (61, 2050, 3001), (128, 11008, 4096)):
    out[f'u8s8_odd_{m}x{k}x{n}_registered_b'] = ('u8', 's8', m, k, n, True, False, False)
  return out


def model(a, b, m, k, n, registered, b7, per_col, rng):
  """The QLinearMatMul model and its feeds."""
  y = 'u8' if a == 'u8' else 's8'
  info = np.iinfo(NUMPY[b])
  b_values = rng.integers(info.min, info.max + 1, size=(k, n), dtype=NUMPY[b])
  if b7:
    b_values = (b_values >> 1).astype(NUMPY[b])
  a_info = np.iinfo(NUMPY[a])
  a_values = rng.integers(a_info.min, a_info.max + 1, size=(m, k), dtype=NUMPY[a])
  # An output scale that keeps most outputs off the clamp (compare.mjs's outputScale).
  def root_mean_square(t, zero_point):
    return np.sqrt(5461.25 + ((127.5 if t == 'u8' else -0.5) - zero_point) ** 2)
  spread = root_mean_square(a, A_ZERO_POINT[a]) * root_mean_square(b, B_ZERO_POINT)
  y_scale = A_SCALE * B_SCALE * np.sqrt(k) * spread * 3 / 127
  inits = [
      numpy_helper.from_array(np.array(A_SCALE, np.float32), 'a_scale'),
      numpy_helper.from_array(np.array(A_ZERO_POINT[a], NUMPY[a]), 'a_zero_point'),
      numpy_helper.from_array(np.array(y_scale, np.float32), 'y_scale'),
      numpy_helper.from_array(np.array(128 if y == 'u8' else 0, NUMPY[y]), 'y_zero_point'),
  ]
  if per_col:
    inits.append(numpy_helper.from_array(
        (B_SCALE * (0.5 + rng.random(n) / 4)).astype(np.float32), 'b_scale'))
    inits.append(numpy_helper.from_array(rng.integers(1, 4, size=n).astype(NUMPY[b]), 'b_zero_point'))
  else:
    inits.append(numpy_helper.from_array(np.array(B_SCALE, np.float32), 'b_scale'))
    inits.append(numpy_helper.from_array(np.array(B_ZERO_POINT, NUMPY[b]), 'b_zero_point'))
  inputs = [helper.make_tensor_value_info('a', ONNX[a], [m, k])]
  feeds = {'a': a_values}
  if registered:
    inits.append(numpy_helper.from_array(b_values, 'b'))
  else:
    inputs.append(helper.make_tensor_value_info('b', ONNX[b], [k, n]))
    feeds['b'] = b_values
  node = helper.make_node('QLinearMatMul', ['a', 'a_scale', 'a_zero_point', 'b', 'b_scale',
                                            'b_zero_point', 'y_scale', 'y_zero_point'], ['y'],
                         name='matmul')
  graph = helper.make_graph([node], 'qgemm', inputs,
                            [helper.make_tensor_value_info('y', ONNX[y], [m, n])], inits)
  proto = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)])
  proto.ir_version = 8
  return proto.SerializeToString(), feeds


def time_operator(model_bytes, feeds, threads, min_time, folder):
  """Median kernel seconds of the QLinearMatMul over the timed calls (ORT's profiler), or of
  session.run where the profile has no kernel events."""
  options = ort.SessionOptions()
  options.intra_op_num_threads = threads
  options.inter_op_num_threads = 1
  options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
  options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
  options.enable_profiling = True
  options.profile_file_prefix = os.path.join(folder, 'profile')
  session = ort.InferenceSession(model_bytes, options, providers=['CPUExecutionProvider'])
  warmup = 2
  for _ in range(warmup):
    session.run(None, feeds)
  wall = []
  while len(wall) < 5 or (sum(wall) < min_time and len(wall) < 200):
    start = time.perf_counter()
    session.run(None, feeds)
    wall.append(time.perf_counter() - start)
  with open(session.end_profiling()) as f:
    events = json.load(f)
  runs = sorted((e for e in events if e.get('cat') == 'Session' and e.get('name') == 'model_run'),
                key=lambda e: e['ts'])[warmup:]
  kernels = [e for e in events if e.get('cat') == 'Node' and e['name'].endswith('_kernel_time')]
  per_run = [sum(e['dur'] for e in kernels if r['ts'] <= e['ts'] <= r['ts'] + r['dur']) for r in runs]
  if len(per_run) != len(wall) or not all(per_run):
    return statistics.median(wall)
  return statistics.median(per_run) / 1e6


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--benchmark_filter', default='.')
  parser.add_argument('--benchmark_min_time', default='0.3')
  parser.add_argument('--benchmark_format', default='json')
  parser.add_argument('--threads', type=int, default=int(os.environ.get('DMLSERVE_CPU_THREADS', 2)))
  args = parser.parse_args()
  min_time = float(args.benchmark_min_time.rstrip('s'))
  pattern = re.compile(args.benchmark_filter)
  results = []
  with tempfile.TemporaryDirectory() as folder:
    for name, (a, b, m, k, n, registered, b7, per_col) in cases().items():
      # Named as dmlserve_bench names its cases (…/real_time), so that one
      # filter selects the same cases in both (a B per request is 'name/').
      full = f'BM_OrtQGemm/{name}/real_time'
      if not pattern.search(full):
        continue
      rng = np.random.default_rng(zlib.crc32(name.encode()))  # the same data in every run
      model_bytes, feeds = model(a, b, m, k, n, registered, b7, per_col, rng)
      seconds = time_operator(model_bytes, feeds, args.threads, min_time, folder)
      results.append({'name': full, 'run_type': 'iteration', 'real_time': seconds * 1e9,
                      'time_unit': 'ns', 'GOP/s': 2 * m * k * n / seconds / 1e9})
      print(f'{full}: {results[-1]["GOP/s"]:.0f} GOP/s', file=sys.stderr)
  json.dump({'context': {'onnxruntime': ort.__version__, 'threads': args.threads},
             'benchmarks': results}, sys.stdout, indent=1)
  print()


if __name__ == '__main__':
  main()
