// A minimal ONNX ModelProto encoder: just enough protobuf to describe a graph
// of one or two nodes with typed inputs, initializers and outputs, so the
// comparison needs no protobuf package and no model files on disk.
//
// Field numbers are those of onnx/onnx.proto (ModelProto, GraphProto,
// NodeProto, AttributeProto, TensorProto, ValueInfoProto, TypeProto,
// TensorShapeProto, OperatorSetIdProto).

// TensorProto.DataType values.
export const DataType = Object.freeze({
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  INT32: 6,
  INT64: 7,
});

// Protobuf wire types.
const VARINT = 0;
const LENGTH_DELIMITED = 2;

// Accumulates the bytes of one protobuf message.
class Writer {
  constructor() {
    this.chunks = [];
  }

  varint(value) {
    // BigInt so that int64 fields (dims, negative values) encode exactly;
    // negative values take ten bytes as two's complement, as protobuf requires.
    let v = BigInt.asUintN(64, BigInt(value));
    const bytes = [];
    do {
      let byte = Number(v & 0x7fn);
      v >>= 7n;
      if (v !== 0n) byte |= 0x80;
      bytes.push(byte);
    } while (v !== 0n);
    this.chunks.push(Uint8Array.from(bytes));
    return this;
  }

  tag(field, wireType) {
    return this.varint((field << 3) | wireType);
  }

  intField(field, value) {
    return this.tag(field, VARINT).varint(value);
  }

  bytesField(field, bytes) {
    this.tag(field, LENGTH_DELIMITED).varint(bytes.length);
    this.chunks.push(bytes);
    return this;
  }

  stringField(field, text) {
    return this.bytesField(field, new TextEncoder().encode(text));
  }

  messageField(field, writer) {
    return this.bytesField(field, writer.finish());
  }

  finish() {
    const length = this.chunks.reduce((sum, chunk) => sum + chunk.length, 0);
    const out = new Uint8Array(length);
    let offset = 0;
    for (const chunk of this.chunks) {
      out.set(chunk, offset);
      offset += chunk.length;
    }
    return out;
  }
}

// TensorProto with raw little-endian data (`data` is a typed array whose
// element type matches `dataType`).
function tensorProto(name, dataType, dims, data) {
  const w = new Writer();
  for (const dim of dims) w.intField(1, dim);
  w.intField(2, dataType);
  w.stringField(8, name);
  w.bytesField(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  return w;
}

// ValueInfoProto for a tensor of fixed shape.
function valueInfo(name, dataType, dims) {
  const shape = new Writer();
  for (const dim of dims) shape.messageField(1, new Writer().intField(1, dim));
  const tensorType = new Writer().intField(1, dataType).messageField(2, shape);
  const type = new Writer().messageField(1, tensorType);
  return new Writer().stringField(1, name).messageField(2, type);
}

// AttributeProto of type INT (AttributeType 2).
function intAttribute(name, value) {
  return new Writer().stringField(1, name).intField(3, value).intField(20, 2);
}

// Encodes a ModelProto.
//   graph.nodes:        [{opType, inputs, outputs, name, domain?, attributes?: {name: int}}]
//   graph.inputs:       [{name, dataType, dims}]           (fed at run time)
//   graph.initializers: [{name, dataType, dims, data}]     (constants in the model)
//   graph.outputs:      [{name, dataType, dims}]
export function encodeModel({opsetVersion, graph}) {
  const g = new Writer();
  for (const node of graph.nodes) {
    const n = new Writer();
    for (const input of node.inputs) n.stringField(1, input);
    for (const output of node.outputs) n.stringField(2, output);
    n.stringField(3, node.name);
    n.stringField(4, node.opType);
    for (const [name, value] of Object.entries(node.attributes ?? {})) {
      n.messageField(5, intAttribute(name, value));
    }
    if (node.domain) n.stringField(7, node.domain);
    g.messageField(1, n);
  }
  g.stringField(2, 'dmlserve_compare');
  for (const t of graph.initializers) {
    g.messageField(5, tensorProto(t.name, t.dataType, t.dims, t.data));
  }
  for (const v of graph.inputs) g.messageField(11, valueInfo(v.name, v.dataType, v.dims));
  for (const v of graph.outputs) g.messageField(12, valueInfo(v.name, v.dataType, v.dims));

  const model = new Writer();
  model.intField(1, 8);  // ir_version 8 (ONNX 1.10+), understood by every current runtime
  model.stringField(2, 'dmlserve bench/onnxruntime');
  model.messageField(7, g);
  model.messageField(8, new Writer().stringField(1, '').intField(2, opsetVersion));
  return model.finish();
}
