// dmlserve's Node.js client: one gRPC channel to a server, typed arrays in and out.
// See index.d.ts for the API and docs/client.md ("Node.js client") for a tour.
"use strict";
const fs = require("fs");
const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

// The .proto files: packed into the package (copy-proto.js), or the repository's when this
// directory is used in place.
function protoRoot() {
  for (const candidate of [path.join(__dirname, "proto"), path.join(__dirname, "..", "..", "proto")]) {
    if (fs.existsSync(path.join(candidate, "dmlserve/v1/dmlserve.proto"))) return candidate;
  }
  throw new Error("dmlserve-client: dmlserve/v1/dmlserve.proto not found next to the package");
}

const definition = protoLoader.loadSync("dmlserve/v1/dmlserve.proto", {
  includeDirs: [protoRoot()],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const v1 = grpc.loadPackageDefinition(definition).dmlserve.v1;

// dmlserve.v1.DataType -> the typed array holding its elements (FLOAT16: raw bits).
const ARRAYS = {
  FLOAT32: Float32Array, FLOAT64: Float64Array, FLOAT16: Uint16Array,
  UINT8: Uint8Array, UINT16: Uint16Array, UINT32: Uint32Array, UINT64: BigUint64Array,
  INT8: Int8Array, INT16: Int16Array, INT32: Int32Array, INT64: BigInt64Array,
};

// A failed call: `code` is the gRPC status code (grpc.status), `codeName` its name.
class DmlserveError extends Error {
  constructor(code, message, requestId = "") {
    const codeName = Object.keys(grpc.status).find((name) => grpc.status[name] === code) || "UNKNOWN";
    super(`${codeName}: ${message}`);
    this.name = "DmlserveError";
    this.code = code;
    this.codeName = codeName;
    this.details = message;
    this.requestId = requestId;
  }
}

function toProto(tensor) {
  if (tensor.tensorId !== undefined) return {tensor_id: tensor.tensorId};
  const {dataType, sizes, data} = tensor;
  if (!(dataType in ARRAYS)) throw new TypeError(`unknown dataType ${dataType}`);
  const array = data instanceof ARRAYS[dataType] ? data : ARRAYS[dataType].from(data);
  // Elements are little-endian on the wire, as typed arrays are on every platform Node runs.
  return {data_type: dataType, sizes: Array.from(sizes),
          data: Buffer.from(array.buffer, array.byteOffset, array.byteLength)};
}

function fromProto(tensor) {
  const Array_ = ARRAYS[tensor.data_type];
  const bytes = Buffer.from(tensor.data);  // a copy, aligned for the typed array
  const aligned = new Uint8Array(bytes.length);
  aligned.set(bytes);
  return {dataType: tensor.data_type, sizes: tensor.sizes.map(Number),
          data: new Array_(aligned.buffer, 0, bytes.length / Array_.BYTES_PER_ELEMENT)};
}

function scalar(value, dataType) {
  return {dataType, sizes: [1, 1, 1, 1], data: [value]};
}

function asScale(value) {
  return typeof value === "number" ? toProto(scalar(value, "FLOAT32")) : toProto(value);
}

function asZeroPoint(value, dataType) {
  if (value === undefined || value === null) return undefined;
  return typeof value === "number" ? toProto(scalar(value, dataType)) : toProto(value);
}

class Client {
  // `address` is HOST:PORT. options.timeoutMs: each call's deadline (default 30000; 0: none).
  // options.credentials: grpc.ChannelCredentials (default: plaintext).
  constructor(address, options = {}) {
    this.timeoutMs = options.timeoutMs === undefined ? 30000 : options.timeoutMs;
    this.stub = new v1.OperatorService(address, options.credentials || grpc.credentials.createInsecure(), {
      "grpc.max_receive_message_length": -1,
      "grpc.max_send_message_length": -1,
    });
  }

  close() {
    this.stub.close();
  }

  callOptions() {
    return this.timeoutMs > 0 ? {deadline: new Date(Date.now() + this.timeoutMs)} : {};
  }

  unary(method, request) {
    return new Promise((resolve, reject) => {
      this.stub[method](request, this.callOptions(), (error, response) => {
        if (error) reject(new DmlserveError(error.code, error.details || error.message));
        else resolve(response);
      });
    });
  }

  // A raw dmlserve.v1.ExecuteRequest (proto field names); resolves to the ExecuteResponse.
  execute(request) {
    return this.unary("Execute", request);
  }

  async cumsum(input, options = {}) {
    const response = await this.execute({cumulative_summation: scanMessage(input, options, "has_exclusive_sum")});
    return fromProto(response.output);
  }

  async cumprod(input, options = {}) {
    const response = await this.execute({cumulative_product: scanMessage(input, options, "has_exclusive_product")});
    return fromProto(response.output);
  }

  // Quantized matrix multiply; see index.d.ts for the inputs. Scales may be plain numbers
  // (per tensor, FLOAT32); zero points given as numbers take their matrix's data type.
  async qmatmul(inputs) {
    const operation = {
      a: toProto(inputs.a),
      a_scale: asScale(inputs.aScale),
      b: toProto(inputs.b),
      b_scale: asScale(inputs.bScale),
      output_scale: asScale(inputs.outputScale),
    };
    const aZero = asZeroPoint(inputs.aZeroPoint, inputs.a.dataType);
    const bZero = asZeroPoint(inputs.bZeroPoint, inputs.b.dataType);
    const outputZero = asZeroPoint(inputs.outputZeroPoint, inputs.outputDataType);
    if (aZero) operation.a_zero_point = aZero;
    if (bZero) operation.b_zero_point = bZero;
    if (outputZero) operation.output_zero_point = outputZero;
    if (inputs.outputDataType) operation.output_data_type = inputs.outputDataType;
    const response = await this.execute({quantized_linear_matrix_multiply: operation});
    return fromProto(response.output);
  }

  // Keeps `tensor` on the server; resolves to its tensor id (generated when not given).
  async register(tensor, tensorId = "") {
    const message = toProto(tensor);
    if (tensorId) message.tensor_id = tensorId;
    return (await this.unary("RegisterTensor", {tensor: message})).tensor_id;
  }

  async release(tensorId) {
    await this.unary("ReleaseTensor", {tensor_id: tensorId});
  }

  info() {
    return this.unary("GetServerInfo", {});
  }

  // Sends every request on one stream; resolves, in request order, to each response or the
  // item's DmlserveError. Missing request ids are filled in.
  stream(requests) {
    return new Promise((resolve, reject) => {
      const index = new Map();
      requests.forEach((request, i) => {
        if (!request.request_id) request.request_id = `request-${i}`;
        index.set(request.request_id, i);
      });
      const results = new Array(requests.length).fill(undefined);
      const call = this.stub.ExecuteStream(this.callOptions());
      call.on("data", (response) => {
        const i = index.get(response.request_id);
        if (i === undefined) return;
        results[i] = response.status && response.status.code !== 0
          ? new DmlserveError(response.status.code, response.status.message, response.request_id)
          : response;
      });
      call.on("error", (error) => reject(new DmlserveError(error.code, error.details || error.message)));
      call.on("end", () => resolve(results.map((result, i) => result ||
        new DmlserveError(grpc.status.INTERNAL, "the stream ended without a response", requests[i].request_id))));
      for (const request of requests) call.write(request);
      call.end();
    });
  }
}

function scanMessage(input, {axis = 0, reverse = false, exclusive = false}, exclusiveField) {
  return {
    input: toProto(input),
    axis,
    axis_direction: reverse ? "AXIS_DIRECTION_DECREASING" : "AXIS_DIRECTION_INCREASING",
    [exclusiveField]: exclusive,
  };
}

// A tensor kept on the server with register(), by id.
function tensorRef(tensorId) {
  return {tensorId};
}

module.exports = {Client, DmlserveError, tensorRef, grpc};
