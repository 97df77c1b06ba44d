// Compiled with tsc --strict --noEmit against index.d.ts: the declarations describe a usable API.
import {Client, DmlserveError, OutputTensor, tensorRef} from "dmlserve-client";

async function main(address: string): Promise<number> {
  const client = new Client(address, {timeoutMs: 5000});
  const sum: OutputTensor = await client.cumsum({dataType: "FLOAT32", sizes: [3], data: [1, 2, 3]},
                                               {axis: 0, exclusive: true});
  const product = await client.qmatmul({a: {dataType: "INT8", sizes: [1, 2], data: [1, -1]}, aScale: 0.5,
                                        b: tensorRef("weights"), bScale: 0.25, outputScale: 1,
                                        outputDataType: "INT8"});
  try {
    await client.release("weights");
  } catch (error) {
    if (error instanceof DmlserveError) return error.code;
  }
  client.close();
  return sum.data.length + product.sizes.length;
}
main("127.0.0.1:50051");
