// dmlserve-client (client/node) installed from npm-style packaging, against the real server.
// Run by run_node_tests.sh: node --test, with DMLSERVE_ADDRESS set.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const {Client, DmlserveError, tensorRef, grpc} = require("dmlserve-client");

const client = new Client(process.env.DMLSERVE_ADDRESS, {timeoutMs: 60000});
test.after(() => client.close());

test("cumulative sum and product match a reference", async () => {
  const data = Float32Array.from({length: 12}, (_, i) => i + 1);
  const sum = await client.cumsum({dataType: "FLOAT32", sizes: [3, 4], data}, {axis: 1});
  assert.equal(sum.dataType, "FLOAT32");
  assert.deepEqual(sum.sizes, [3, 4]);
  const expected = [];
  for (let row = 0; row < 3; ++row) {
    let running = 0;
    for (let column = 0; column < 4; ++column) expected.push((running += data[row * 4 + column]));
  }
  assert.deepEqual(Array.from(sum.data), expected);

  // UINT32 products wrap; reverse and exclusive.
  const values = Uint32Array.from([70000, 70000, 3]);
  const product = await client.cumprod({dataType: "UINT32", sizes: [3], data: values},
                                       {reverse: true, exclusive: true});
  assert.ok(product.data instanceof Uint32Array);
  assert.deepEqual(Array.from(product.data), [(70000 * 3) >>> 0, 3, 1]);
});

test("a registered B serves quantized matrix multiplies", async () => {
  const k = 4, n = 3;
  const b = Uint8Array.from({length: k * n}, (_, i) => 10 * i);
  const id = await client.register({dataType: "UINT8", sizes: [k, n], data: b}, "node-b");
  assert.equal(id, "node-b");
  const a = Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8]);
  const out = await client.qmatmul({
    a: {dataType: "UINT8", sizes: [2, k], data: a}, aScale: 1,
    b: tensorRef(id), bScale: 1, bZeroPoint: {dataType: "UINT8", sizes: [1, 1], data: [0]},
    outputScale: 64, outputDataType: "UINT8",
  });
  assert.deepEqual(out.sizes, [2, n]);
  const expected = [];
  for (let row = 0; row < 2; ++row) {
    for (let column = 0; column < n; ++column) {
      let accumulator = 0;
      for (let i = 0; i < k; ++i) accumulator += a[row * k + i] * b[i * n + column];
      const scaled = accumulator / 64;
      let rounded = Math.round(scaled);
      if (Math.abs(scaled - Math.trunc(scaled)) === 0.5) rounded = 2 * Math.round(scaled / 2);
      expected.push(Math.min(255, Math.max(0, rounded)));
    }
  }
  assert.deepEqual(Array.from(out.data), expected);
  await client.release(id);
});

test("errors name the field", async () => {
  await assert.rejects(
    client.cumsum({dataType: "FLOAT32", sizes: [2], data: [1, 2]}, {axis: 3}),
    (error) => error instanceof DmlserveError && error.code === grpc.status.INVALID_ARGUMENT &&
               error.details.includes("axis"));
});

test("a stream answers every item in order, a bad one with its error", async () => {
  const scan = (values) => ({cumulative_summation: {input: {data_type: "INT32", sizes: [values.length],
    data: Buffer.from(Int32Array.from(values).buffer)}}});
  const results = await client.stream([scan([1, 2]), {cumulative_summation: {}}, scan([3, 4, 5])]);
  assert.equal(results.length, 3);
  assert.ok(!(results[0] instanceof DmlserveError));
  assert.ok(results[1] instanceof DmlserveError);
  assert.equal(results[1].code, grpc.status.INVALID_ARGUMENT);
  assert.deepEqual(Array.from(new Int32Array(Uint8Array.from(results[2].output.data).buffer)), [3, 7, 12]);
});

test("info lists the operators", async () => {
  const info = await client.info();
  assert.deepEqual(info.operators.map((operator) => operator.name).sort(),
                   ["cumulative_product", "cumulative_summation", "quantized_linear_matrix_multiply"]);
});
