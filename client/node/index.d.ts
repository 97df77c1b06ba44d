// Type declarations of dmlserve-client (index.js).
import * as grpc from "@grpc/grpc-js";

export type DataType =
  | "FLOAT32" | "FLOAT16" | "FLOAT64"
  | "UINT8" | "UINT16" | "UINT32" | "UINT64"
  | "INT8" | "INT16" | "INT32" | "INT64";

export type TypedArray =
  | Float32Array | Float64Array | Uint8Array | Uint16Array | Uint32Array | BigUint64Array
  | Int8Array | Int16Array | Int32Array | BigInt64Array;

/** A tensor by value: row-major elements (FLOAT16 as their raw 16-bit patterns). */
export interface Tensor {
  dataType: DataType;
  sizes: number[];
  data: TypedArray | ArrayLike<number> | ArrayLike<bigint>;
}

/** A tensor kept on the server (Client.register), by id. */
export interface TensorRef {
  tensorId: string;
}

export type Operand = Tensor | TensorRef;

/** An operator's result. */
export interface OutputTensor {
  dataType: DataType;
  sizes: number[];
  data: TypedArray;
}

export interface ScanOptions {
  axis?: number;
  /** Scan from the end of the axis (AXIS_DIRECTION_DECREASING). */
  reverse?: boolean;
  /** Leave the current element out of each result. */
  exclusive?: boolean;
}

export interface QuantizedMatMulInputs {
  a: Operand;
  /** A plain number is one FLOAT32 scale for the whole tensor. */
  aScale: number | Operand;
  /** A plain number takes a's data type. */
  aZeroPoint?: number | Operand;
  b: Operand;
  bScale: number | Operand;
  bZeroPoint?: number | Operand;
  outputScale: number | Operand;
  outputZeroPoint?: number | Operand;
  outputDataType?: "UINT8" | "INT8";
}

export interface ClientOptions {
  /** Each call's deadline in milliseconds (default 30000; 0: none). */
  timeoutMs?: number;
  /** TLS credentials (grpc.credentials.createSsl(...)); default plaintext. */
  credentials?: grpc.ChannelCredentials;
}

/** A failed call or stream item. */
export class DmlserveError extends Error {
  readonly code: grpc.status;
  readonly codeName: string;
  /** The server's message, e.g. "cumulative_summation.axis: 5 is out of range ...". */
  readonly details: string;
  readonly requestId: string;
}

export class Client {
  constructor(address: string, options?: ClientOptions);
  close(): void;
  /** A raw dmlserve.v1.ExecuteRequest, with the proto's field names. */
  execute(request: object): Promise<any>;
  cumsum(input: Operand, options?: ScanOptions): Promise<OutputTensor>;
  cumprod(input: Operand, options?: ScanOptions): Promise<OutputTensor>;
  qmatmul(inputs: QuantizedMatMulInputs): Promise<OutputTensor>;
  register(tensor: Tensor, tensorId?: string): Promise<string>;
  release(tensorId: string): Promise<void>;
  /** The GetServerInfoResponse (proto field names). */
  info(): Promise<any>;
  /** One stream for all requests; each result is its response or its DmlserveError. */
  stream(requests: object[]): Promise<Array<any | DmlserveError>>;
}

export function tensorRef(tensorId: string): TensorRef;
export { grpc };
