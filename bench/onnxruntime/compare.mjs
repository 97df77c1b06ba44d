// Runs dmlserve's CPU backend (Google Benchmark binary), ONNX Runtime and,
// when built, the oneDNN benchmark on the same cases, interleaved case by
// case so that all columns see the same machine state, and prints one
// markdown table. Started by bench/compare_onnxruntime.sh, which installs
// onnxruntime-node into a temporary folder and passes it as --ort_modules.
//
//   node compare.mjs --ort_modules=DIR/node_modules [--dmlserve_bench=PATH]
//       [--onednn_bench=PATH] [--filter=REGEX] [--runs=N] [--min_time=SECONDS]
//
// Units: matrix multiplies in GOP/s (2*M*K*N operations per call), scans in
// GB/s (input plus output bytes per call). Every number is a median.

import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import {createRequire} from 'node:module';
import os from 'node:os';
import path from 'node:path';

import {DataType, encodeModel} from './onnx_model.mjs';

// ---------------------------------------------------------------------------
// The cases: the one list the dmlserve (BM_CpuQGemm/<name>, BM_CpuScan/<name>)
// and oneDNN (BM_OneDnnQGemm/<name>) benchmarks mirror.
//
// Matrix multiplies: A {m,k} of type `a`, B {k,n} of type `b`, output int8.
// `registeredB`: B is a constant of the model (ORT prepacks it at session
// creation, dmlserve keeps a registered tensor packed, oneDNN reorders it
// once); otherwise B arrives with every call. `perColumn`: B's scale and zero
// point have one value per column (shape [N]); otherwise everything is per
// tensor.
const MATMUL_CASES = [
  {name: 'u8s8_256x4096x4096_registered_b', a: 'u8', b: 's8', m: 256, k: 4096, n: 4096, registeredB: true},
  {name: 'u8s8_256x4096x4096', a: 'u8', b: 's8', m: 256, k: 4096, n: 4096, registeredB: false},
  // 7-bit weights (B in [-64, 63], ORT's reduce-range quantization for AVX2): where saturating
  // vpmaddubsw is exact, so dmlserve's AVX2 level may use it too.
  {name: 'u8s8_b7_256x4096x4096_registered_b', a: 'u8', b: 's8', m: 256, k: 4096, n: 4096, registeredB: true, sevenBitB: true},
  {name: 'u8s8_b7_256x4096x4096', a: 'u8', b: 's8', m: 256, k: 4096, n: 4096, registeredB: false, sevenBitB: true},
  {name: 'u8s8_per_column_256x4096x4096_registered_b', a: 'u8', b: 's8', m: 256, k: 4096, n: 4096, registeredB: true, perColumn: true},
  {name: 'u8u8_256x4096x4096_registered_b', a: 'u8', b: 'u8', m: 256, k: 4096, n: 4096, registeredB: true},
  {name: 's8s8_256x4096x4096_registered_b', a: 's8', b: 's8', m: 256, k: 4096, n: 4096, registeredB: true},
  {name: 's8u8_256x4096x4096_registered_b', a: 's8', b: 'u8', m: 256, k: 4096, n: 4096, registeredB: true},
  {name: 'u8s8_1024x1024x1024_registered_b', a: 'u8', b: 's8', m: 1024, k: 1024, n: 1024, registeredB: true},
  {name: 'u8s8_16x4096x4096_registered_b', a: 'u8', b: 's8', m: 16, k: 4096, n: 4096, registeredB: true},
  {name: 'u8s8_1x4096x4096_registered_b', a: 'u8', b: 's8', m: 1, k: 4096, n: 4096, registeredB: true},
  {name: 'u8s8_b7_1x4096x4096_registered_b', a: 'u8', b: 's8', m: 1, k: 4096, n: 4096, registeredB: true, sevenBitB: true},
  {name: 'u8s8_1x4096x4096', a: 'u8', b: 's8', m: 1, k: 4096, n: 4096, registeredB: false},
];

// Scans: inclusive, increasing. `op` is cumsum or cumprod.
const SCAN_CASES = [
  {name: 'cumsum_f32_1x1x1024x1024_axis3', op: 'cumsum', type: 'f32', sizes: [1, 1, 1024, 1024], axis: 3},
  {name: 'cumsum_f32_1x1x1024x1024_axis2', op: 'cumsum', type: 'f32', sizes: [1, 1, 1024, 1024], axis: 2},
  {name: 'cumsum_f32_16M_axis0', op: 'cumsum', type: 'f32', sizes: [16777216], axis: 0},
  {name: 'cumsum_i32_16M_axis0', op: 'cumsum', type: 'i32', sizes: [16777216], axis: 0},
  {name: 'cumsum_f32_64x64x64x64_axis0', op: 'cumsum', type: 'f32', sizes: [64, 64, 64, 64], axis: 0},
  {name: 'cumsum_f32_64x64x64x64_axis1', op: 'cumsum', type: 'f32', sizes: [64, 64, 64, 64], axis: 1},
  {name: 'cumsum_f32_64x64x64x64_axis2', op: 'cumsum', type: 'f32', sizes: [64, 64, 64, 64], axis: 2},
  {name: 'cumsum_f32_64x64x64x64_axis3', op: 'cumsum', type: 'f32', sizes: [64, 64, 64, 64], axis: 3},
  {name: 'cumprod_f32_64x64x64x64_axis1', op: 'cumprod', type: 'f32', sizes: [64, 64, 64, 64], axis: 1},
];

// Every matrix multiply's output is int8 (the dmlserve and oneDNN cases).
const OUTPUT_TYPE = 's8';

// Quantization parameters shared by all matrix multiplies. Zero points are
// non-zero on purpose: they are the costly part of the semantics.
const A_SCALE = 0.02;
const B_SCALE = 0.01;
const A_ZERO_POINT = {u8: 128, s8: 3};
const B_ZERO_POINT = 1;

// ONNX opsets: QLinearMatMul and CumSum exist since 10 and 11 (CumSum's
// types grew in 14); CumProd only exists from opset 26 on.
const OPSET = {matmul: 13, cumsum: 14, cumprod: 26};

const TYPES = {
  u8: {onnx: DataType.UINT8, array: Uint8Array, ort: 'uint8', min: 0, max: 255},
  s8: {onnx: DataType.INT8, array: Int8Array, ort: 'int8', min: -128, max: 127},
  f32: {onnx: DataType.FLOAT, array: Float32Array, ort: 'float32'},
  i32: {onnx: DataType.INT32, array: Int32Array, ort: 'int32'},
};

// ---------------------------------------------------------------------------
// Command line.

function parseArgs(argv) {
  const args = {runs: 5, minTime: 0.2, rounds: 3, filter: '', dmlserveBench: 'build/bench/dmlserve_bench', onednnBench: ''};
  for (const arg of argv) {
    const [key, value] = arg.replace(/^--/, '').split(/=(.*)/s);
    switch (key) {
      case 'ort_modules': args.ortModules = value; break;
      case 'dmlserve_bench': args.dmlserveBench = value; break;
      case 'onednn_bench': args.onednnBench = value; break;
      case 'filter': args.filter = value; break;
      case 'runs': args.runs = Math.max(5, Number(value)); break;
      case 'min_time': args.minTime = Number(value); break;
      case 'rounds': args.rounds = Math.max(1, Number(value)); break;
      default: throw new Error(`unknown argument ${arg}`);
    }
  }
  if (!args.ortModules) throw new Error('--ort_modules=DIR (onnxruntime-node\'s node_modules) is required');
  return args;
}

// ---------------------------------------------------------------------------
// Work per call, for the units.

function matmulOps(c) {
  return 2 * c.m * c.k * c.n;
}

function scanBytes(c) {
  const elements = c.sizes.reduce((a, b) => a * b, 1);
  return 2 * elements * TYPES[c.type].array.BYTES_PER_ELEMENT;  // input + output
}

// ---------------------------------------------------------------------------
// Deterministic data (seeded; the same on every run).

// splitmix32-style generator: small, fast, and good enough for benchmark data.
function makeRandom(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

function randomInts(type, count, random) {
  const {array, min, max} = TYPES[type];
  const out = new array(count);
  const span = max - min + 1;
  for (let i = 0; i < count; ++i) out[i] = min + (random() % span);
  return out;
}

function scanInput(c, random) {
  const count = c.sizes.reduce((a, b) => a * b, 1);
  if (c.type === 'f32') {
    // Near 1, so sums and products stay finite whatever the axis length.
    const out = new Float32Array(count);
    for (let i = 0; i < count; ++i) out[i] = 0.9 + 0.2 * (random() / 4294967296);
    return out;
  }
  const out = new Int32Array(count);
  for (let i = 0; i < count; ++i) out[i] = (random() % 201) - 100;
  return out;
}

// ---------------------------------------------------------------------------
// ONNX models.

const scalar = (name, type, value) => ({name, dataType: TYPES[type].onnx, dims: [], data: TYPES[type].array.of(value)});

// The output scale that spreads the results over the output range. For
// uniformly random 8-bit x, (x - z) has a mean square of 5461.25 (the
// variance, (256^2 - 1)/12) plus (mean - z)^2; a sum of K products of
// independent such terms has a standard deviation of sqrt(K) times the
// product of their root mean squares; +-3 of those map to +-127.
function rootMeanSquare(type, zeroPoint) {
  const mean = type === 'u8' ? 127.5 : -0.5;
  return Math.sqrt(5461.25 + (mean - zeroPoint) ** 2);
}

function outputScale(c) {
  const spread = rootMeanSquare(c.a, A_ZERO_POINT[c.a]) * rootMeanSquare(c.b, B_ZERO_POINT);
  return (A_SCALE * B_SCALE * Math.sqrt(c.k) * spread * 3) / 127;
}

// Builds the QLinearMatMul model and its run-time feeds for a case, with the
// given output type (ORT has no kernel for every combination; see below).
function matmulModel(ort, c, outputType, random) {
  const aType = TYPES[c.a];
  const bType = TYPES[c.b];
  const a = randomInts(c.a, c.m * c.k, random);
  const b = randomInts(c.b, c.k * c.n, random);
  // Halved (as int8): 7-bit values.
  if (c.sevenBitB) for (let i = 0; i < b.length; ++i) b[i] = b[i] >> 1;
  const initializers = [
    scalar('a_scale', 'f32', A_SCALE),
    scalar('a_zero_point', c.a, A_ZERO_POINT[c.a]),
    scalar('y_scale', 'f32', outputScale(c)),
    // The middle of the output range: 0 for int8, 128 for uint8.
    scalar('y_zero_point', outputType, outputType === 'u8' ? 128 : 0),
  ];
  // What the exactness check (wrongOutputs) needs to recompute outputs.
  const reference = {a, b, aZeroPoint: A_ZERO_POINT[c.a], yScale: outputScale(c),
                     yZeroPoint: outputType === 'u8' ? 128 : 0, yType: outputType,
                     bScales: null, bZeroPoints: null};
  if (c.perColumn) {
    const scales = new Float32Array(c.n);
    const zeroPoints = new bType.array(c.n);
    for (let j = 0; j < c.n; ++j) {
      scales[j] = B_SCALE * (0.5 + random() / 4294967296);
      zeroPoints[j] = 1 + (random() % 3);  // 1..3: non-zero, valid for both types
    }
    reference.bScales = scales;
    reference.bZeroPoints = zeroPoints;
    initializers.push({name: 'b_scale', dataType: DataType.FLOAT, dims: [c.n], data: scales});
    initializers.push({name: 'b_zero_point', dataType: bType.onnx, dims: [c.n], data: zeroPoints});
  } else {
    initializers.push(scalar('b_scale', 'f32', B_SCALE));
    initializers.push(scalar('b_zero_point', c.b, B_ZERO_POINT));
  }
  const inputs = [{name: 'a', dataType: aType.onnx, dims: [c.m, c.k]}];
  const feeds = {a: new ort.Tensor(aType.ort, a, [c.m, c.k])};
  if (c.registeredB) {
    initializers.push({name: 'b', dataType: bType.onnx, dims: [c.k, c.n], data: b});
  } else {
    inputs.push({name: 'b', dataType: bType.onnx, dims: [c.k, c.n]});
    feeds.b = new ort.Tensor(bType.ort, b, [c.k, c.n]);
  }
  const model = encodeModel({
    opsetVersion: OPSET.matmul,
    graph: {
      nodes: [{
        opType: 'QLinearMatMul', name: 'matmul',
        inputs: ['a', 'a_scale', 'a_zero_point', 'b', 'b_scale', 'b_zero_point', 'y_scale', 'y_zero_point'],
        outputs: ['y'],
      }],
      inputs,
      initializers,
      outputs: [{name: 'y', dataType: TYPES[outputType].onnx, dims: [c.m, c.n]}],
    },
  });
  return {model, feeds, reference};
}

// Recomputes up to 8 rows of a QLinearMatMul output exactly (int32 sums,
// requantized in double) and counts the outputs that differ from `y` by more
// than 1 (float rounding of the scale may move a result by 1): an engine
// whose int8 step saturates (vpmaddubsw on full-range weights) shows here.
function wrongOutputs(c, reference, y) {
  const {a, b, aZeroPoint, yScale, yZeroPoint, yType, bScales, bZeroPoints} = reference;
  const {min, max} = TYPES[yType];
  const rows = Math.min(c.m, 8);
  let wrong = 0;
  for (let i = 0; i < rows; ++i) {
    const r = Math.floor((i * c.m) / rows);
    const sums = new Float64Array(c.n);
    for (let k = 0; k < c.k; ++k) {
      const av = a[r * c.k + k] - aZeroPoint;
      if (av === 0) continue;
      const row = k * c.n;
      for (let j = 0; j < c.n; ++j) sums[j] += av * (b[row + j] - (bZeroPoints ? bZeroPoints[j] : B_ZERO_POINT));
    }
    for (let j = 0; j < c.n; ++j) {
      const scale = (A_SCALE * (bScales ? bScales[j] : B_SCALE)) / yScale;
      const x = sums[j] * scale;
      let q = Math.round(x);
      if (Math.abs(x - Math.trunc(x)) === 0.5) q = 2 * Math.round(x / 2);  // ties to even
      const expected = Math.min(max, Math.max(min, q + yZeroPoint));
      if (Math.abs(expected - y[r * c.n + j]) > 1) ++wrong;
    }
  }
  return {wrong, checked: rows * c.n};
}

function scanModel(ort, c, random) {
  const type = TYPES[c.type];
  const model = encodeModel({
    opsetVersion: OPSET[c.op],
    graph: {
      nodes: [{opType: c.op === 'cumsum' ? 'CumSum' : 'CumProd', name: c.op, inputs: ['x', 'axis'], outputs: ['y']}],
      inputs: [{name: 'x', dataType: type.onnx, dims: c.sizes}],
      // The axis is a constant, as it is an attribute in DirectML.
      initializers: [{name: 'axis', dataType: DataType.INT64, dims: [], data: BigInt64Array.of(BigInt(c.axis))}],
      outputs: [{name: 'y', dataType: type.onnx, dims: c.sizes}],
    },
  });
  return {model, feeds: {x: new ort.Tensor(type.ort, scanInput(c, random), c.sizes)}};
}

// ---------------------------------------------------------------------------
// ONNX Runtime.

const median = (values) => {
  const sorted = [...values].sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

const WARMUP_RUNS = 2;

// Runs one model: warm-up, then at least `runs` timed calls (more while the
// calls so far took less than `minTime` seconds, up to 100). Returns the
// median kernel time (from ORT's profiler: the sum of the node kernel_time
// events inside each model_run), the median session.run wall time, the
// kernels that ran, and the output of the last call.
async function runOrt(ort, model, feeds, {runs, minTime, profileDir}) {
  // ORT names the profile <prefix>_<date>.json; a folder per case keeps
  // them apart.
  const caseDir = fs.mkdtempSync(path.join(profileDir, 'case-'));
  const profilePrefix = path.join(caseDir, 'profile');
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: 2,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    enableProfiling: true,
    profileFilePrefix: profilePrefix,
  });
  let output;
  for (let i = 0; i < WARMUP_RUNS; ++i) output = await session.run(feeds);
  const wall = [];
  let elapsed = 0;
  while (wall.length < runs || (elapsed < minTime && wall.length < 100)) {
    const start = process.hrtime.bigint();
    output = await session.run(feeds);
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    wall.push(seconds);
    elapsed += seconds;
  }
  session.endProfiling();
  await session.release();

  const files = fs.readdirSync(caseDir).filter((f) => f.endsWith('.json'));
  if (files.length !== 1) throw new Error(`expected one ORT profile, found ${files.length}`);
  const events = JSON.parse(fs.readFileSync(path.join(caseDir, files[0]), 'utf8'));
  fs.rmSync(caseDir, {recursive: true, force: true});
  const modelRuns = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((x, y) => x.ts - y.ts);
  const kernels = events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'));
  const measured = modelRuns.slice(WARMUP_RUNS);
  if (measured.length !== wall.length) {
    throw new Error(`ORT profile has ${modelRuns.length} runs, expected ${wall.length + WARMUP_RUNS}`);
  }
  const kernelSeconds = measured.map((run) => {
    let us = 0;
    for (const k of kernels) if (k.ts >= run.ts && k.ts <= run.ts + run.dur) us += k.dur;
    return us / 1e6;
  });
  const ops = [...new Set(kernels.map((k) => `${k.args.op_name}(${k.args.provider ?? 'cpu'})`))];
  return {kernel: median(kernelSeconds), wall: median(wall), ops, calls: wall.length, output};
}

// ---------------------------------------------------------------------------
// Google Benchmark binaries.

// The case names a binary defines (without /real_time and the like), or null
// when the binary does not exist.
function listBenchmarks(binary) {
  if (!binary || !fs.existsSync(binary)) return null;
  const result = spawnSync(binary, ['--benchmark_list_tests=true'], {encoding: 'utf8'});
  if (result.status !== 0) throw new Error(`${binary} --benchmark_list_tests failed: ${result.stderr}`);
  return new Set(result.stdout.split('\n').filter(Boolean).map((line) => line.replace(/\/(real_time|process_time|manual_time)$/, '')));
}

const escapeRegex = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// Runs one benchmark (5 repetitions, medians only) and returns its rate in
// the case's unit, {missing: true}, or {error: message}.
function runGoogleBenchmark(binary, names, fullName, unit, work, minTime) {
  if (!names || !names.has(fullName)) return {missing: true};
  const result = spawnSync(binary, [
    `--benchmark_filter=^${escapeRegex(fullName)}(/[a-z_]+)?$`,
    '--benchmark_repetitions=5',
    '--benchmark_report_aggregates_only=true',
    '--benchmark_format=json',
    `--benchmark_min_time=${minTime}`,
  ], {encoding: 'utf8', maxBuffer: 64 << 20});
  if (result.status !== 0) return {error: `exit ${result.status}: ${result.stderr.trim().split('\n').pop()}`};
  // Google Benchmark writes non-finite counters (e.g. the stddev of a
  // constant) as bare NaN/inf, which JSON does not allow.
  const report = JSON.parse(result.stdout.replace(/:\s*-?(nan|NaN|inf|Infinity)\b/g, ': null'));
  const runs = report.benchmarks.filter((b) => b.run_name.replace(/\/(real_time|process_time|manual_time)$/, '') === fullName);
  // A case a benchmark skips with a message starting with "unsupported" is
  // n/a (what the library cannot compute), any other skip an error.
  const skipped = runs.find((b) => b.error_occurred);
  if (skipped) {
    return /^unsupported/i.test(skipped.error_message) ? {na: skipped.error_message} : {error: skipped.error_message};
  }
  const entry = runs.find((b) => b.aggregate_name === 'median');
  if (!entry) return {error: 'no median in the report'};
  // The rate comes from the median real time and this script's own count of
  // work, so that every column uses the same definition; the benchmark's
  // counter (GOP/s or bytes_per_second, in units per second) only serves as
  // a cross-check.
  const scale = {ns: 1e-9, us: 1e-6, ms: 1e-3, s: 1}[entry.time_unit];
  const rate = work / (entry.real_time * scale) / 1e9;
  // The GOP/s counters are already in GOP/s; bytes_per_second is in B/s.
  const counter = unit === 'GOP/s' ? entry['GOP/s'] : entry.bytes_per_second / 1e9;
  if (counter !== undefined && !Number.isNaN(counter) && Math.abs(counter / rate - 1) > 0.05) {
    console.error(`\nwarning: ${fullName} reports ${counter.toPrecision(4)} ${unit}, ` +
        `its time gives ${rate.toPrecision(4)}: a different count of work?`);
  }
  return {rate};
}

// ---------------------------------------------------------------------------
// Table.

const fmt = (rate) => (rate >= 100 ? rate.toFixed(0) : rate >= 10 ? rate.toFixed(1) : rate.toFixed(2));

function cell(result, notes) {
  if (result.missing) return 'missing';
  if (result.none) return '—';
  if (result.na) return `n/a${note(notes, result.na)}`;
  if (result.error) return `error${note(notes, result.error)}`;
  return fmt(result.rate) + (result.note ? note(notes, result.note) : '');
}

// Footnote markers, one per distinct text.
function note(notes, text) {
  if (!notes.has(text)) notes.set(text, `[${notes.size + 1}]`);
  return ` ${notes.get(text)}`;
}

// ---------------------------------------------------------------------------

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const require = createRequire(path.join(path.resolve(args.ortModules), 'noop.js'));
  const ort = require('onnxruntime-node');
  const ortVersion = require('onnxruntime-node/package.json').version;
  const filter = new RegExp(args.filter);
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dmlserve-ort-profile-'));

  const dmlserveNames = listBenchmarks(args.dmlserveBench);
  const onednnNames = args.onednnBench ? listBenchmarks(args.onednnBench) : null;
  if (!dmlserveNames) console.error(`warning: ${args.dmlserveBench} not found; dmlserve cells say "missing"`);

  const notes = new Map();
  const rows = [];
  const details = [];
  const cases = [
    ...MATMUL_CASES.map((c) => ({...c, kind: 'matmul', unit: 'GOP/s', work: matmulOps(c), bench: 'BM_CpuQGemm'})),
    ...SCAN_CASES.map((c) => ({...c, kind: 'scan', unit: 'GB/s', work: scanBytes(c), bench: 'BM_CpuScan'})),
  ].filter((c) => filter.test(c.name));

  // Keeps the faster of two results (a result without a rate only when
  // there is nothing better).
  const better = (a, b) => (!a || (b.rate && (!a.rate || b.rate > a.rate)) ? b : a);

  for (const c of cases) {
    process.stderr.write(`${c.name}:`);
    // Seeded by the case's name: the same data whatever --filter selects.
    const random = makeRandom([...c.name].reduce((h, ch) => Math.imul(h ^ ch.charCodeAt(0), 16777619), 2166136261));

    let built = null;
    let ortResult = null;
    try {
      if (c.kind === 'matmul') {
        // ORT's CPU QLinearMatMul kernels are (A, B, output) = (u8, u8, u8),
        // (u8, s8, u8) and (s8, s8, s8): the output type follows A, and there
        // is none with A int8 and B uint8. A uint8 A therefore runs with a
        // uint8 output (the same integer product; only the final clamp
        // differs), flagged in the table.
        const outputType = c.a === 'u8' ? 'u8' : OUTPUT_TYPE;
        if (c.a === 's8' && c.b === 'u8') {
          ortResult = {na: 'ORT has no QLinearMatMul kernel for A int8 with B uint8'};
        } else {
          built = matmulModel(ort, c, outputType, random);
          built.outputType = outputType;
        }
      } else {
        built = scanModel(ort, c, random);
      }
    } catch (e) {
      ortResult = {error: String(e.message ?? e).split('\n')[0]};
    }

    // Rounds interleave the engines; each keeps its best round. On a shared
    // machine interference only ever slows a run down, so the best round is
    // the closest to what each engine can do, for all of them alike.
    let dml = null;
    let ortWall = null;
    let onednn = null;
    let ortDetail = null;
    for (let round = 0; round < args.rounds; ++round) {
      process.stderr.write(` [${round + 1}] dmlserve`);
      dml = better(dml, runGoogleBenchmark(args.dmlserveBench, dmlserveNames, `${c.bench}/${c.name}`, c.unit, c.work, args.minTime));

      if (built) {
        process.stderr.write(', onnxruntime');
        try {
          let run;
          try {
            run = await runOrt(ort, built.model, built.feeds, {runs: args.runs, minTime: args.minTime, profileDir});
          } catch (e) {
            // An ONNX Runtime too old for the opset (CumProd needs 26).
            if (c.op === 'cumprod') throw Object.assign(new Error(String(e.message ?? e).split('\n')[0]), {na: true});
            throw e;
          }
          const result = {rate: c.work / run.kernel / 1e9};
          if (c.kind === 'matmul' && built.outputType !== OUTPUT_TYPE) {
            result.note = 'uint8 output: ORT has no QLinearMatMul kernel for A uint8 with an int8 output';
          }
          if (better(ortResult, result) === result) {
            ortResult = result;
            let detail = `${c.name}: ${run.calls} calls, kernels ${run.ops.join(' + ')}, ` +
                `operator ${(run.kernel * 1e3).toFixed(3)} ms, session.run ${(run.wall * 1e3).toFixed(3)} ms`;
            if (c.kind === 'matmul') {
              // How many outputs hit the clamp: a check that the output scale
              // keeps the numbers meaningful.
              const {min, max} = TYPES[built.outputType];
              const y = run.output.y.data;
              let clamped = 0;
              for (const v of y) if (v === min || v === max) ++clamped;
              detail += `, ${((100 * clamped) / y.length).toFixed(2)}% of outputs saturated`;
              const {wrong, checked} = wrongOutputs(c, built.reference, y);
              detail += `, ${wrong} of ${checked} checked outputs wrong (off by more than 1)`;
              if (wrong > 0) {
                const wrongNote = `${wrong} of ${checked} checked outputs wrong (off by more than 1)`;
                result.note = result.note ? `${result.note}; ${wrongNote}` : wrongNote;
              }
            }
            ortDetail = detail;
          }
          ortWall = better(ortWall, {rate: c.work / run.wall / 1e9});
        } catch (e) {
          ortResult = e.na ? {na: `ONNX Runtime ${ortVersion} cannot run it: ${e.message}`} : {error: String(e.message ?? e).split('\n')[0]};
          built = null;
        }
      }

      if (onednnNames) {
        process.stderr.write(', onednn');
        onednn = c.kind === 'matmul'
          ? better(onednn, runGoogleBenchmark(args.onednnBench, onednnNames, `BM_OneDnnQGemm/${c.name}`, c.unit, c.work, args.minTime))
          : {none: true};
      }
    }
    if (ortDetail) details.push(ortDetail);
    process.stderr.write('\n');

    const ratio = dml.rate && ortResult.rate ? `${(dml.rate / ortResult.rate).toFixed(2)}x` : '—';
    const row = [`\`${c.name}\``, c.unit, cell(dml, notes), cell(ortResult, notes), ratio,
      ortWall ? fmt(ortWall.rate) : '—'];
    if (onednnNames) row.push(cell(onednn, notes));
    rows.push(row);
  }

  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  console.log(`ONNX Runtime ${ortVersion} (onnxruntime-node, CPU execution provider, intra_op 2 threads, inter_op 1, ` +
      `graph optimizations all); ${cpu}, ${os.cpus().length} logical CPUs; ${new Date().toISOString()}`);
  console.log(`dmlserve: ${args.dmlserveBench}${args.onednnBench ? `; oneDNN: ${args.onednnBench}` : ''}`);
  console.log('');
  const header = ['case', 'unit', 'dmlserve', 'ONNX Runtime (operator)', 'ratio', 'ONNX Runtime (session.run)'];
  if (onednnNames) header.push('oneDNN');
  console.log(`| ${header.join(' | ')} |`);
  console.log(`|${header.map((h, i) => (i < 2 ? '---' : '---:')).join('|')}|`);
  for (const row of rows) console.log(`| ${row.join(' | ')} |`);
  console.log('');
  console.log(`Each cell: the best of ${args.rounds} interleaved rounds, each round the median of its calls. ` +
      'ratio = dmlserve / ONNX Runtime (operator); above 1 dmlserve is faster. ' +
      'GOP/s = 2*M*K*N per call; GB/s = (input + output bytes) per call. ' +
      'ONNX Runtime (operator) is the kernel time from its profiler, session.run the wall time of a call.');
  for (const [text, marker] of notes) console.log(`${marker} ${text}`);
  console.log('');
  console.log('<details><summary>ONNX Runtime runs</summary>\n');
  for (const line of details) console.log(`- ${line}`);
  console.log('\n</details>');
  fs.rmSync(profileDir, {recursive: true, force: true});
}

main().catch((e) => {
  console.error(e.stack ?? e);
  process.exit(1);
});
